// Command kubectl-mcm is the kubectl plugin for the machines of the
// machine-controller-manager API (machine.sapcloud.io/v1alpha1): kubectl
// finds it on the PATH and runs it as "kubectl mcm".
//
//	go install github.com/mcmkit/mcm/kubectl-mcm@latest
//	kubectl mcm tree -n shoot--dev web -w
//	kubectl mcm rollout status web
//	kubectl mcm preview web --class big
//
// README.md shows every command with its output; package internal/cli
// has the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcmkit/mcm/kubectl-mcm/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, Getenv: os.Getenv})
	stop()
	os.Exit(code)
}
