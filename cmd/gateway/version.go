package main

import (
	"flag"
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

// runVersion prints the build's version. It has no flags; -h and --help
// print its usage and exit 0, as every other command's do.
func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: gateway version\n\nprints the build's version: the one linked in with -ldflags \"-X main.version=...\",\nelse the module's, with the VCS revision and Go version the build recorded.\n")
	}
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("%w: version takes no arguments", errUsage)
	}
	fmt.Fprintln(stdout, versionString())
	return nil
}
