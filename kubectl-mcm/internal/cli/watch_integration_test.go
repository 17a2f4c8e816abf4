package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/kubectl-mcm/internal/cli"
)

var (
	colour     = regexp.MustCompile(`\x1b\[[0-9;]*m`)
	newSetLine = regexp.MustCompile(`MachineSet/\S+  rev 2  desired \d+, current \d+, ready \d+`)
)

// TestIntegrationTreeWatchTerminal drives tree -w in a pseudo-terminal
// during a rollout (a restart of 3 machines, one at a time) and reads the
// screen as a person would see it: every frame clears the screen, and the
// new set's counts move from nothing to 3 ready across frames.
func TestIntegrationTreeWatchTerminal(t *testing.T) {
	s := simstack.Start(t, simstack.Options{Deployments: true})
	screen, terminal := openPTY(t)
	p := newPlugin(t, s)
	create(t, s, rollingDeployment(s.NS, "web", s.Class, 3))
	p.ok(t, "rollout", "status", "web", "--timeout", settle.String())

	var mu sync.Mutex
	var shown bytes.Buffer
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := screen.Read(buf)
			mu.Lock()
			shown.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	frames := func() []string {
		mu.Lock()
		defer mu.Unlock()
		text := colour.ReplaceAllString(strings.ReplaceAll(shown.String(), "\r", ""), "")
		return strings.Split(text, "\x1b[H\x1b[2J")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errOut bytes.Buffer
	exit := make(chan int, 1)
	go func() {
		exit <- cli.Main(ctx, []string{"tree", "web", "-w", "--kubeconfig", p.kubeconfig, "-n", p.ns},
			cli.Streams{Out: terminal, ErrOut: &errOut})
	}()
	testenv.Eventually(t, settle, func(context.Context) (bool, string) {
		f := frames()
		return strings.Contains(f[len(f)-1], "desired 3, current 3, ready 3"), fmt.Sprintf("last frame:\n%s", f[len(f)-1])
	})
	p.ok(t, "rollout", "restart", "web")
	counts := map[string]bool{}
	testenv.Eventually(t, settle, func(context.Context) (bool, string) {
		for _, f := range frames() {
			if m := newSetLine.FindString(f); m != "" {
				counts[m[strings.Index(m, "desired"):]] = true
			}
		}
		last := frames()[len(frames())-1]
		done := strings.Contains(newSetLine.FindString(last), "desired 3, current 3, ready 3")
		return done && len(counts) >= 3, fmt.Sprintf("new set's counts seen: %v; last frame:\n%s", counts, last)
	})
	cancel()
	if code := <-exit; code != 0 {
		t.Errorf("tree -w exited %d: %s", code, errOut.String())
	}
	t.Logf("the new set's counts moved through %d states", len(counts))
}
