//go:build race

package engine

// raceDetector is set in -race builds, where the heaviest tests run a
// subset of their cases (the same assertions on fewer cases) so that the
// package fits the default test timeout.
const raceDetector = true
