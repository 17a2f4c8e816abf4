// Package cli is kubectl mcm's commands: their flags, following kubectl's
// conventions, and what each reads and writes in the clusters. What a
// command shows is decided by the pure packages beside it (tree, rollout,
// explain, preview) and by the library (deployment.PreviewChange,
// drain.Drainer), so that the plugin cannot disagree with the
// controllers.
//
// Conventions, as kubectl's:
//
//   - --kubeconfig, --context and -n/--namespace choose the control
//     cluster (machines) through client-go's loading rules ($KUBECONFIG,
//     ~/.kube/config); --target-kubeconfig the nodes' cluster, by default
//     the same one.
//   - Flags and arguments mix freely ("tree web -n shop -w").
//   - Exit code 0 on success, 1 on an error, printed to stderr as
//     "error: ...".
//   - Commands that list (tree, rollout history) take -o json|yaml.
//   - Colour and redrawing in place only on a terminal (stdout is a
//     character device), and no colour when NO_COLOR is set.
//
// # Usage
//
//	os.Exit(cli.Main(ctx, os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, Getenv: os.Getenv}))
package cli
