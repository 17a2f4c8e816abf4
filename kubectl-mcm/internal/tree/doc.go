// Package tree draws a namespace's machines as a tree: MachineDeployments,
// their MachineSets (revision and replicas), the sets' machines (phase,
// age, what each does now) and the machines' nodes (Ready and what else
// is notable), for kubectl mcm tree.
//
// Build turns objects, as read from the clusters, into a Tree (which -o
// json and -o yaml print as it is); Render draws a Tree as text. Both are
// pure: the time is an argument, so a tree drawn twice from the same
// objects reads the same, and the golden tests fix it.
//
// A set's machines that look alike — the same phase, the same node state
// and the same kind of activity — are listed one by one up to
// RenderOptions.GroupAbove; a larger group shows its first GroupShown
// machines and "… N more Running machines, node Ready", so that a
// deployment of a thousand machines fits a screen. Machines that need
// attention (Failed, Unknown, updating, being created or deleted) come
// first.
//
// # Usage
//
//	t := tree.Build(tree.Objects{Deployments: ds, Sets: ss, Machines: ms, Nodes: nodes}, time.Now())
//	fmt.Print(tree.Render(t, tree.RenderOptions{Now: time.Now(), Color: isTerminal}))
package tree
