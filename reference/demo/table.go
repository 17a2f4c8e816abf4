package main

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
)

// row is one machine as the table shows it.
type row struct {
	name, set, phase, node string
	deleting               bool
	created                time.Time
}

// listRows reads the demo machines from the informer cache, sorted by name.
func listRows(lister machinelisters.MachineNamespaceLister) ([]row, error) {
	list, err := lister.List(labels.Everything()) // the informer selects the demo's machines
	if err != nil {
		return nil, err
	}
	rows := make([]row, 0, len(list))
	for _, m := range list {
		phase := string(m.Status.CurrentStatus.Phase)
		if m.DeletionTimestamp != nil && phase == "" {
			phase = "Terminating"
		}
		var set string
		if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
			set = ref.Name
		}
		rows = append(rows, row{name: m.Name, set: set, phase: phase, node: m.Labels[v1alpha1.NodeLabelKey],
			deleting: m.DeletionTimestamp != nil, created: m.CreationTimestamp.Time})
	}
	slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.name, b.name) })
	return rows, nil
}

func allPhase(rows []row, phase v1alpha1.MachinePhase, want int) bool {
	if len(rows) < want {
		return false
	}
	for _, r := range rows {
		if r.phase != string(phase) {
			return false
		}
	}
	return true
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// redraw replaces the previous block (drawn lines) with the header line,
// if any, and the table of rows, and returns the block's height.
func (d *demo) redraw(header string, rows []row, drawn int) int {
	var buf bytes.Buffer
	if header != "" {
		fmt.Fprintf(&buf, "%s\n\n", header)
	}
	tw := tabwriter.NewWriter(&buf, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSET\tPHASE\tNODE\tAGE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.name, dash(r.set), dash(r.phase), dash(r.node), age(r.created))
	}
	_ = tw.Flush()
	if drawn > 0 {
		fmt.Fprintf(d.out, "\x1b[%dA\x1b[J", drawn) // cursor up, clear to the end
	}
	_, _ = d.out.Write(buf.Bytes())
	return bytes.Count(buf.Bytes(), []byte("\n"))
}

// printChanges prints one line per machine whose phase or node changed,
// and one per machine that is gone.
func (d *demo) printChanges(rows []row, last map[string]row) {
	now := time.Now().Format("15:04:05")
	seen := make(map[string]bool, len(rows))
	for _, r := range rows {
		seen[r.name] = true
		prev, known := last[r.name]
		if known && prev.phase == r.phase && prev.node == r.node {
			continue
		}
		last[r.name] = r
		d.printf("%s  %-22s set=%-16s phase=%-12s node=%-22s age=%s\n", now, r.name, dash(r.set), dash(r.phase), dash(r.node), age(r.created))
	}
	for _, name := range slices.Sorted(maps.Keys(last)) {
		if !seen[name] {
			delete(last, name)
			d.printf("%s  %-22s gone\n", now, name)
		}
	}
}

func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
