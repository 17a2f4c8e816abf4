//go:build !linux

package cli_test

import (
	"os"
	"testing"
)

func openPTY(t *testing.T) (screen, terminal *os.File) {
	t.Skip("pseudo-terminals are opened through Linux's /dev/ptmx only")
	return nil, nil
}
