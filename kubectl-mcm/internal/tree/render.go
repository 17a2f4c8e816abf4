package tree

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// RenderOptions shape the text of a tree.
type RenderOptions struct {
	// Now is the time ages are counted to.
	Now time.Time
	// ShowAll lists every machine; otherwise a set's machines that look
	// alike (same phase, node state and activity) are listed up to
	// GroupShown and counted beyond when there are more than GroupAbove.
	ShowAll bool
	// GroupAbove and GroupShown: zero means DefaultGroupAbove and
	// DefaultGroupShown.
	GroupAbove, GroupShown int
	// Color marks phases and problems with ANSI colours, for a terminal.
	Color bool
}

// Grouping defaults: at most seven alike machines are listed one by one;
// a larger group shows three and a count.
const (
	DefaultGroupAbove = 7
	DefaultGroupShown = 3
)

const (
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiReset  = "\x1b[0m"
)

// Render draws t as lines of text, each ending in a newline; an empty tree
// is "No resources found.".
func Render(t Tree, o RenderOptions) string {
	if o.GroupAbove <= 0 {
		o.GroupAbove = DefaultGroupAbove
	}
	if o.GroupShown <= 0 {
		o.GroupShown = DefaultGroupShown
	}
	r := &renderer{o: o}
	for _, d := range t.Deployments {
		r.separate()
		r.deployment(d)
	}
	if len(t.Sets) > 0 {
		r.separate()
		r.b.WriteString("MachineSets without a MachineDeployment:\n")
		for i, s := range t.Sets {
			r.set("", s, i == len(t.Sets)-1)
		}
	}
	if len(t.Machines) > 0 {
		r.separate()
		r.b.WriteString("Machines without a MachineSet:\n")
		r.machines("", t.Machines)
	}
	if r.b.Len() == 0 {
		return "No resources found.\n"
	}
	return r.b.String()
}

type renderer struct {
	o RenderOptions
	b strings.Builder
}

// separate puts an empty line between top-level blocks.
func (r *renderer) separate() {
	if r.b.Len() > 0 {
		r.b.WriteString("\n")
	}
}

func (r *renderer) deployment(d Deployment) {
	fmt.Fprintf(&r.b, "MachineDeployment/%s  %s  replicas %d, updated %d, ready %d, available %d%s\n",
		d.Name, d.Strategy, d.Replicas, d.Updated, d.Ready, d.Available, r.notes(d.Notes, ansiYellow))
	for i, s := range d.Sets {
		r.set("", s, i == len(d.Sets)-1)
	}
}

func (r *renderer) set(indent string, s Set, last bool) {
	branch, child := "├── ", "│   "
	if last {
		branch, child = "└── ", "    "
	}
	rev := ""
	if s.Revision > 0 {
		rev = fmt.Sprintf("  rev %d", s.Revision)
	}
	fmt.Fprintf(&r.b, "%s%sMachineSet/%s%s  desired %d, current %d, ready %d%s\n",
		indent, branch, s.Name, rev, s.Desired, s.Current, s.Ready, r.notes(s.Notes, ansiYellow))
	r.machines(indent+child, s.Machines)
}

// line is one line under a set: a machine, or the count of alike machines
// not listed.
type line struct {
	machine *Machine
	more    int
	like    Machine
}

// machines lists ms under indent, alike machines grouped.
func (r *renderer) machines(indent string, ms []Machine) {
	lines := r.group(ms)
	width := 0
	for _, l := range lines {
		if l.machine != nil {
			width = max(width, len(l.machine.Name))
		}
	}
	for i, l := range lines {
		branch := "├── "
		if i == len(lines)-1 {
			branch = "└── "
		}
		if l.machine == nil {
			fmt.Fprintf(&r.b, "%s%s… %d more %s machines%s\n", indent, branch, l.more, r.phase(l.like.Phase), r.nodeText(&l.like))
			continue
		}
		fmt.Fprintf(&r.b, "%s%sMachine/%-*s  %s  %s%s%s\n", indent, branch, width, l.machine.Name,
			r.phase(l.machine.Phase), duration.HumanDuration(r.o.Now.Sub(l.machine.Created)), r.nodeText(l.machine), r.doing(l.machine))
	}
}

// group keeps ms' order, listing at most GroupShown machines of a group
// of more than GroupAbove alike machines, and the count of the rest right
// after the last one listed.
func (r *renderer) group(ms []Machine) []line {
	size := map[string]int{}
	for _, m := range ms {
		size[groupKey(m)]++
	}
	shown := map[string]int{}
	var out []line
	for i := range ms {
		k := groupKey(ms[i])
		if r.o.ShowAll || size[k] <= r.o.GroupAbove {
			out = append(out, line{machine: &ms[i]})
			continue
		}
		shown[k]++
		switch {
		case shown[k] <= r.o.GroupShown:
			out = append(out, line{machine: &ms[i]})
		case shown[k] == r.o.GroupShown+1:
			out = append(out, line{more: size[k] - r.o.GroupShown, like: ms[i]})
		}
	}
	return out
}

func groupKey(m Machine) string {
	k := string(m.Phase) + "|" + m.DoingKind
	if m.Node != nil {
		k += "|" + string(m.Node.Ready) + "|" + strings.Join(m.Node.Notes, ",")
	}
	return k
}

func (r *renderer) phase(p v1alpha1.MachinePhase) string {
	text := string(p)
	if text == "" {
		text = "-"
	}
	switch p {
	case v1alpha1.MachineRunning, v1alpha1.MachineAvailable:
		return r.paint(text, ansiGreen)
	case v1alpha1.MachineFailed, v1alpha1.MachineCrashLoopBackOff, v1alpha1.MachineInPlaceUpdateFailed, v1alpha1.MachineUnknown:
		return r.paint(text, ansiRed)
	}
	return r.paint(text, ansiYellow)
}

// nodeText is ", node <name> Ready [notes]", the name left out when it is
// the machine's (as with most providers).
func (r *renderer) nodeText(m *Machine) string {
	if m.Node == nil {
		return ""
	}
	name := ""
	if m.Node.Name != m.Name && m.Name != "" {
		name = m.Node.Name + " "
	}
	word := m.Node.ReadyWord()
	if word != "Ready" {
		word = r.paint(word, ansiRed)
	}
	return ", node " + name + word + r.notes(m.Node.Notes, ansiYellow)
}

func (r *renderer) doing(m *Machine) string {
	if m.Doing == "" {
		return ""
	}
	color := ansiYellow
	if m.DoingKind == "failed" {
		color = ansiRed
	}
	return "  " + r.paint(m.Doing, color)
}

func (r *renderer) notes(notes []string, color string) string {
	if len(notes) == 0 {
		return ""
	}
	return "  " + r.paint("["+strings.Join(notes, "; ")+"]", color)
}

func (r *renderer) paint(s, color string) string {
	if !r.o.Color {
		return s
	}
	return color + s + ansiReset
}
