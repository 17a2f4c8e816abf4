package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// process is one control-plane component running as a child process, its
// output going to a log file that survives until the environment is removed.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	log     *os.File
	done    chan struct{} // closed when the process has exited
	exitErr error         // valid after done is closed
}

// startProcess runs binary with args, writing stdout and stderr to
// logDir/name.log.
func startProcess(name, binary, logDir string, args ...string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening log of %s: %w", name, err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = childAttributes()
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.exitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		if p.exitErr == nil {
			return true, errors.New("exited with status 0")
		}
		return true, p.exitErr
	default:
		return false, nil
	}
}

// stop asks the process to terminate and kills it if it has not ended within
// grace.
func (p *process) stop(grace time.Duration) {
	if ended, _ := p.exited(); !ended {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	_ = p.log.Close()
}

// logSize is the current length of the log, a mark for tailSince.
func (p *process) logSize() int64 {
	fi, err := os.Stat(p.logPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// tailSince returns at most maxLines of what the process logged after offset.
func (p *process) tailSince(offset int64, maxLines int) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	defer f.Close()
	// Read at most the last 256 KiB: enough for maxLines of klog output.
	const window = 256 << 10
	size := p.logSize()
	if size-offset > window {
		offset = size - window
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// processGroup tracks the components of one cluster so they stop in reverse
// start order.
type processGroup struct {
	mu    sync.Mutex
	procs []*process
}

func (g *processGroup) add(p *process) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.procs = append(g.procs, p)
}

func (g *processGroup) all() []*process {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]*process(nil), g.procs...)
}

// lostPort reports whether a process of the group has ended because its
// port was taken, as its log says.
func (g *processGroup) lostPort() bool {
	for _, p := range g.all() {
		if ended, _ := p.exited(); !ended {
			continue
		}
		if out, err := os.ReadFile(p.logPath); err == nil && bytes.Contains(out, []byte("address already in use")) {
			return true
		}
	}
	return false
}

func (g *processGroup) stopAll(grace time.Duration) {
	procs := g.all()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop(grace)
	}
}
