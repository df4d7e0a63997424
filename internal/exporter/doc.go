// Package exporter renders what the shmkit library reports about its files
// (counters, scans, Check reports, heartbeat snapshots) as Prometheus
// metrics and as a health verdict: the collector of `ringctl serve` and of
// `hbdump check --format prometheus`.
//
// It only reads. Every file is opened read-only (PROT_READ, O_RDONLY,
// without attaching: transport.OpenRingReadOnly and kin), never waited for
// (a file not yet initialised is reported, not awaited), read under
// shm.Guard (a file truncated under a scrape is reported, not a crash) and
// closed before the scrape returns. A scrape never takes a participant
// entry, a lock or a repair role, so it can never block or disturb the
// processes using the files; it never repairs.
//
// It is not a judge: healthy and unhealthy are the library's verdicts
// (Check's findings, Participant.Health), and it decodes no word of a file
// itself. It is not part of the core packages: the library knows nothing of
// Prometheus.
package exporter
