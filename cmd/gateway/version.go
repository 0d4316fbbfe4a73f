package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// version is set at link time where the build has no VCS data to read
// (the Dockerfile's, from a context without .git):
// -ldflags "-X main.version=v1.2.3". Empty, the build info says.
var version string

// versionString names this build: the linked version or the module's,
// and the commit it was built from when the build recorded one.
func versionString() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return firstNonEmpty(version, "unknown")
	}
	v := firstNonEmpty(version, info.Main.Version)
	var rev, at string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	var extra []string
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += "+dirty"
		}
		extra = append(extra, rev)
	}
	if at != "" {
		extra = append(extra, at)
	}
	extra = append(extra, info.GoVersion)
	return fmt.Sprintf("toolgate %s (%s)", v, strings.Join(extra, ", "))
}

func runVersion(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%w: version takes no arguments", errUsage)
	}
	fmt.Fprintln(stdout, versionString())
	return nil
}
