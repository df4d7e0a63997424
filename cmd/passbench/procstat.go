package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// What else ran during a measurement. Passbench's figures mean little when
// other processes took CPU time from the measured ones; on a machine shared
// with builds and tests that is common. The whole machine's busy time comes
// from /proc/stat; passbench's own (this process and every child it has
// reaped, hogs included) from getrusage. The difference is everybody else.

// userHZ is the unit of /proc/stat's times (USER_HZ): 100 on every Linux
// architecture Go supports, whatever the kernel's internal HZ.
const userHZ = 100

// errNoCPULine is returned for a /proc/stat without an aggregate "cpu" line.
var errNoCPULine = errors.New("no aggregate cpu line")

// cpuTicks is the aggregate "cpu" line of /proc/stat, in USER_HZ ticks.
type cpuTicks struct {
	Busy uint64 // user + nice + system + irq + softirq (guest time is inside user)
	Idle uint64 // idle + iowait
}

// parseProcStat reads the aggregate "cpu" line. Fields after softirq
// (steal, guest, guest_nice) are not busy time of this machine's processes:
// steal is time the hypervisor gave to other guests, guest is already in
// user. At least the first seven fields must be there.
func parseProcStat(r io.Reader) (cpuTicks, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 8 {
			return cpuTicks{}, fmt.Errorf("cpu line has %d fields, want at least 8", len(f))
		}
		var v [7]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[1+i], 10, 64)
			if err != nil {
				return cpuTicks{}, fmt.Errorf("cpu field %d: %w", i+1, err)
			}
			v[i] = n
		}
		user, nice, system, idle, iowait, irq, softirq := v[0], v[1], v[2], v[3], v[4], v[5], v[6]
		return cpuTicks{Busy: user + nice + system + irq + softirq, Idle: idle + iowait}, nil
	}
	if err := sc.Err(); err != nil {
		return cpuTicks{}, err
	}
	return cpuTicks{}, errNoCPULine
}

// cpuSample is one reading of the machine's and passbench's CPU time.
type cpuSample struct {
	ticks cpuTicks
	own   time.Duration // this process and its reaped children, user + system
	at    time.Time
	err   error // /proc/stat or getrusage failed: no figures
}

// sampleCPU reads both clocks now. Call it when every child started since
// the last sample has been reaped, or their time is missing from own.
func sampleCPU() cpuSample {
	s := cpuSample{at: time.Now()}
	f, err := os.Open("/proc/stat")
	if err != nil {
		s.err = err
		return s
	}
	s.ticks, s.err = parseProcStat(f)
	f.Close()
	if s.err != nil {
		s.err = fmt.Errorf("/proc/stat: %w", s.err)
		return s
	}
	var self, kids unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &self); err != nil {
		s.err = err
		return s
	}
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &kids); err != nil {
		s.err = err
		return s
	}
	tv := func(t unix.Timeval) time.Duration { return time.Duration(t.Nano()) }
	s.own = tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
	return s
}

// CPUUse is what the machine's CPUs did between two samples.
type CPUUse struct {
	WallSeconds   float64 `json:"wall_seconds"`
	CPUs          int     `json:"cpus"`
	BusySeconds   float64 `json:"busy_seconds"`   // every process, from /proc/stat
	OwnSeconds    float64 `json:"own_seconds"`    // passbench and its children
	OthersSeconds float64 `json:"others_seconds"` // busy − own, never below 0
	OthersShare   float64 `json:"others_share"`   // others ÷ (wall × CPUs)
	Disturbed     bool    `json:"disturbed"`      // others above the limit: the figures mean little
	Error         string  `json:"error,omitempty"`
}

// Other processes disturb a measurement once they take more than
// disturbShare of the machine's CPU time and at least disturbMin seconds:
// a fraction, so long runs are judged alike, and a floor, so that the odd
// daemon waking up during a short run does not count.
const (
	disturbShare = 0.02
	disturbMin   = 0.25
)

// cpuUseBetween compares two samples taken on a machine of cpus CPUs.
func cpuUseBetween(a, b cpuSample, cpus int) CPUUse {
	u := CPUUse{WallSeconds: b.at.Sub(a.at).Seconds(), CPUs: cpus}
	if err := errors.Join(a.err, b.err); err != nil {
		u.Error = err.Error()
		return u
	}
	if b.ticks.Busy >= a.ticks.Busy {
		u.BusySeconds = float64(b.ticks.Busy-a.ticks.Busy) / userHZ
	}
	u.OwnSeconds = (b.own - a.own).Seconds()
	u.OthersSeconds = max(0, u.BusySeconds-u.OwnSeconds)
	if capacity := u.WallSeconds * float64(cpus); capacity > 0 {
		u.OthersShare = u.OthersSeconds / capacity
	}
	u.Disturbed = u.OthersSeconds >= disturbMin && u.OthersShare > disturbShare
	return u
}

// describe is the one line every report prints about it.
func (u CPUUse) describe() string {
	if u.Error != "" {
		return "could not tell what other processes did (" + u.Error + ")"
	}
	s := fmt.Sprintf("other processes used %.2f s of CPU during the %.1f s run (%.0f%% of %d CPUs); passbench and its children %.2f s",
		u.OthersSeconds, u.WallSeconds, 100*u.OthersShare, u.CPUs, u.OwnSeconds)
	if u.Disturbed {
		s = "WARNING: " + s + ": the figures mean little (they share the CPUs with whatever else ran)"
	}
	return s
}
