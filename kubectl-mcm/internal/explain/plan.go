package explain

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcmkit/mcm/drain"
)

// Plan is a drain's plan for people: a line per pod with its action and
// reason (drain.Decide's), the budgets it waits on, and the summary.
func Plan(p drain.Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Node %s: %s\n", p.Node, summary(p))
	if p.ForceReason != "" {
		fmt.Fprintf(&b, "Forced: %s\n", p.ForceReason)
	}
	if len(p.Decisions) == 0 {
		b.WriteString("No pods on the node.\n")
		return b.String()
	}
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tACTION\tREASON")
	for _, d := range p.Decisions {
		reason := d.Reason
		for _, pdb := range d.PDBs {
			if !strings.Contains(reason, pdb.Name) {
				reason += "; " + pdb.String()
			}
		}
		if !d.ForceAt.IsZero() {
			reason += "; force-deleted at " + d.ForceAt.UTC().Format(time.RFC3339)
		}
		if d.Warning != "" {
			reason += "; warning: " + d.Warning
		}
		if d.Error != "" {
			reason += "; error: " + d.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", d.Pod, d.Action, reason)
	}
	_ = tw.Flush()
	return b.String()
}

func summary(p drain.Plan) string {
	if p.Done {
		return "drained"
	}
	if p.Message != "" {
		return p.Message
	}
	return fmt.Sprintf("%d pod(s) left", p.RemainingPods())
}

// Event is one line of a drain's progress.
func Event(e drain.Event) string {
	return fmt.Sprintf("%s  %s\n", e.Time.UTC().Format(time.TimeOnly), e)
}
