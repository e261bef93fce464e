package main

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets the scripts run this binary as "gclock".
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"gclock": func() { os.Exit(run(os.Args[1:])) },
	})
}

// TestScripts runs testdata/script/*.txtar: the command line as a user
// types it (help on stdout, usage errors on stderr with exit status 2,
// version, completion, config errors), checked on stdout, stderr and the
// exit status.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{Dir: "testdata/script", RequireExplicitExec: true})
}
