//go:build !race

package proxy

// raceDetector is true when tests run under -race, so load tests can size
// themselves to it.
const raceDetector = false
