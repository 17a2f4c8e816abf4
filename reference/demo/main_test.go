package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcmkit/mcm/internal/controlplane"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// The demo, non-interactive: it starts its own control plane, brings the
// deployment's machines up, rolls them over to the second class in waves
// that never take available machines below the floor, prints the kubectl
// commands, and leaves no temp file and no process behind.
func TestDemoExitWhenRunning(t *testing.T) {
	bin, tmp := buildDemo(t)

	var out bytes.Buffer
	cmd := exec.Command(bin, "--exit-when-running", "--demo-timeout=4m", "--machines=3")
	cmd.Dir = "../.." // the module root, where hack/testenv.sh is
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	t.Logf("demo took %v:\n%s", time.Since(start).Round(time.Second), out.String())

	for _, want := range []string{"3/3 demo machines Running", "rollout complete", "available never below 3 (floor 3)",
		"/kubectl --kubeconfig " + tmp, "get mcd,mcs,mc -n mcm-demo", "get nodes", "Manager stopped"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// The rollout went through waves: at some point both sets had replicas.
	waves := regexp.MustCompile(`rollout: old set demo-\w+ [1-9] → new set demo-\w+ [1-9], available`)
	if !waves.MatchString(out.String()) {
		t.Errorf("no rollout line with both sets scaled up")
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind in TMPDIR: %s", e.Name())
	}
	if procs := processesMentioning(t, tmp); len(procs) > 0 {
		t.Errorf("processes left behind: %v", procs)
	}
}

// Interactive use: once the rollout is complete, the kubectl command the
// demo prints shows the deployment and its Running machines while the demo
// keeps running; Ctrl-C (SIGINT) then stops everything and cleans up.
func TestDemoInterrupt(t *testing.T) {
	bin, tmp := buildDemo(t)
	cmd := exec.Command(bin, "--machines=1")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { err := cmd.Wait(); pw.Close(); done <- err }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	var out bytes.Buffer
	kubectl := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			out.WriteString(line + "\n")
			if strings.Contains(line, "get mcd,mcs,mc -n") {
				select {
				case kubectl <- strings.TrimSpace(line):
				default:
				}
			}
		}
	}()
	var command string
	select {
	case command = <-kubectl:
	case err := <-done:
		t.Fatalf("demo exited early: %v", err)
	case <-time.After(4 * time.Minute):
		t.Fatal("no kubectl command within 4m")
	}
	fields := strings.Fields(command)
	got, err := exec.Command(fields[0], fields[1:]...).CombinedOutput()
	if err != nil || !strings.Contains(string(got), "machinedeployment.machine.sapcloud.io/demo") || !strings.Contains(string(got), "Running") {
		t.Errorf("%s: %v\n%s", command, err, got)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("demo after Ctrl-C: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("demo still running 30s after SIGINT")
	}
	<-scanned
	t.Logf("output:\n%s", out.String())
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind in TMPDIR: %s", e.Name())
	}
	if procs := processesMentioning(t, tmp); len(procs) > 0 {
		t.Errorf("processes left behind: %v", procs)
	}
}

// buildDemo skips the test without the test-environment binaries (fails
// with testenv.EnvRequire=1), builds the demo, and returns it with an
// empty directory for its TMPDIR, to check that it is left empty.
func buildDemo(t *testing.T) (bin, tmp string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane: skipped in -short mode")
	}
	if _, err := controlplane.BinDir(); err != nil {
		if os.Getenv(testenv.EnvRequire) == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	bin = filepath.Join(t.TempDir(), "mcm-demo")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tmp = filepath.Join(t.TempDir(), "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	return bin, tmp
}

// processesMentioning lists the command lines that contain s.
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if errors.Is(err, os.ErrNotExist) {
		t.Log("no /proc: not checking for processes")
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if line := string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})); strings.Contains(line, s) {
			found = append(found, e.Name()+": "+line)
		}
	}
	return found
}
