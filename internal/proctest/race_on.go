//go:build race

package transport

// raceEnabled lets tests scale their work down under the race detector.
const raceEnabled = true
