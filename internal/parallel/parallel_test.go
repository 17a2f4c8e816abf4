package parallel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRunBoundsAndOrders: Run keeps at most limit calls in flight, reaches
// that many when there is work for them, and returns the failures in the
// order of work whatever order they finished in.
func TestRunBoundsAndOrders(t *testing.T) {
	for _, tc := range []struct{ limit, calls, wantPeak int }{
		{limit: 4, calls: 10, wantPeak: 4},
		{limit: 16, calls: 3, wantPeak: 3},
		{limit: 0, calls: 3, wantPeak: 1},
	} {
		t.Run(fmt.Sprintf("limit %d, %d calls", tc.limit, tc.calls), func(t *testing.T) {
			var inFlight, peak atomic.Int32
			var work []func(context.Context) error
			for i := range tc.calls {
				work = append(work, func(context.Context) error {
					n := inFlight.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					// Later calls finish first, so the answers come back out of order.
					time.Sleep(time.Duration(tc.calls-i) * 5 * time.Millisecond)
					inFlight.Add(-1)
					if i%2 == 1 {
						return fmt.Errorf("call %d", i)
					}
					return nil
				})
			}
			errs := Run(context.Background(), tc.limit, work)
			if got := int(peak.Load()); got != tc.wantPeak {
				t.Errorf("at most %d calls in flight, want %d", got, tc.wantPeak)
			}
			var got, want []string
			for _, err := range errs {
				got = append(got, err.Error())
			}
			for i := 1; i < tc.calls; i += 2 {
				want = append(want, fmt.Sprintf("call %d", i))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunNothing(t *testing.T) {
	if errs := Run(context.Background(), 4, nil); errs != nil {
		t.Errorf("Run of no work = %v, want nil", errs)
	}
}

func ExampleRun() {
	var done atomic.Int32
	work := []func(context.Context) error{
		func(context.Context) error { done.Add(1); return nil },
		func(context.Context) error { done.Add(1); return errors.New("node b: conflict") },
		func(context.Context) error { done.Add(1); return nil },
	}
	errs := Run(context.Background(), 2, work)
	fmt.Println(done.Load(), "calls;", errors.Join(errs...))
	// Output: 3 calls; node b: conflict
}

// TestRunCallsEveryPieceAfterCancel: with its context done, Run still
// calls every piece, so each one's outcome is known to its caller (where
// workqueue.ParallelizeUntil would skip those not started).
func TestRunCallsEveryPieceAfterCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := make([]bool, 5)
	work := make([]func(context.Context) error, len(called))
	for i := range work {
		work[i] = func(ctx context.Context) error {
			called[i] = true
			return fmt.Errorf("piece %d: %w", i, ctx.Err())
		}
	}
	errs := Run(ctx, 2, work)
	if diff := cmp.Diff([]bool{true, true, true, true, true}, called); diff != "" {
		t.Errorf("pieces called (-want +got):\n%s", diff)
	}
	var got []string
	for _, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v does not wrap context.Canceled", err)
		}
		got = append(got, err.Error())
	}
	want := []string{"piece 0: context canceled", "piece 1: context canceled", "piece 2: context canceled",
		"piece 3: context canceled", "piece 4: context canceled"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// TestNoParallelizeUntil: Run is the module's only bounded fan-out (see
// the package doc for why not client-go's workqueue.ParallelizeUntil).
func TestNoParallelizeUntil(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	fset := token.NewFileSet()
	var calls []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor" || d.Name() == "_output"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go"):
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(src, []byte("ParallelizeUntil")) {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "ParallelizeUntil" {
				calls = append(calls, fset.Position(sel.Pos()).String())
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) > 0 {
		t.Errorf("workqueue.ParallelizeUntil used next to parallel.Run at %v", calls)
	}
}
