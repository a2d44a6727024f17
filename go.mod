module github.com/strata-inference/strata

go 1.26.8

require (
	github.com/ardanlabs/jinja v1.8.0 // indirect
	github.com/dlclark/regexp2 v1.12.0 // indirect
	golang.org/x/image v0.48.0 // indirect
)
