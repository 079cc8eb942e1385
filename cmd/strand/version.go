package main

import (
	"runtime"
	"runtime/debug"
)

// version is the release version, set at build time with
// -ldflags "-X main.version=...".
var version = "dev"

// versionString reports the version, the Go toolchain and, when the binary
// was built from a git checkout, the commit.
func versionString() string {
	s := "strand " + version + " (" + runtime.Version()
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, setting := range info.Settings {
			if setting.Key == "vcs.revision" {
				s += ", commit " + setting.Value
			}
			if setting.Key == "vcs.modified" && setting.Value == "true" {
				s += "+modified"
			}
		}
	}
	return s + ")"
}
