// Package preview makes the proposed MachineDeployment that kubectl mcm
// preview asks deployment.PreviewChange about, from the deployment as
// stored and one of: a file with the whole proposed deployment (-f), a
// new class (--class), or changes of single fields of the spec (--set
// path=value), and prints the answer.
//
// A --set path is dotted and relative to the deployment's spec (a leading
// "spec." is allowed): template.spec.class.name=big,
// replicas=5, template.spec.nodeTemplate.metadata.labels.pool=b. A dot
// inside a key (a label such as node.kubernetes.io/role) is written "\.".
// The value is read as YAML — 5 is a number, true a boolean, {} an
// object — and, where the field wants a string, as the string written.
//
// # Usage
//
//	proposed, err := preview.Propose(current, preview.Change{Sets: []string{"template.spec.class.name=big"}})
//	p, err := deployment.PreviewChange(current, proposed, sets)
//	fmt.Print(preview.Render(current.Name, p))
package preview
