// Package version holds the build's version, set at link time with
// -ldflags "-X github.com/nodelet/nodelet/internal/version.Version=…".
package version

// Version of this build.
var Version = "0.1.0-dev"
