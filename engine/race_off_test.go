//go:build !race

package engine

// raceDetector is set in -race builds (race_on_test.go).
const raceDetector = false
