//go:build race

package proctest

// RaceEnabled is true in binaries built with -race: tests scale their
// work (children, rounds, messages) down under the race detector.
const RaceEnabled = true
