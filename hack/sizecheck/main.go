// Command sizecheck fails when a Go file that is neither a test nor
// generated has more than -max-file lines, or one of its functions more
// than -max-func lines (from the func line to the closing brace), unless
// the line right above the function says why it is long:
//
//	// Long: one table of every flag MCM accepts, kept in MCM's order.
//	func ignoredFlags() []flagSpec {
//
// The marker line is the last line of the doc comment or a comment of its
// own, and needs a reason after "Long:". A long file has no marker: it is
// split.
//
// Usage (from the repository root; the files are git's):
//
//	go run ./hack/sizecheck [-max-file 500] [-max-func 80]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"sort"
	"strings"
)

// marker starts the comment line that lets a function be long.
const marker = "// Long:"

// finding is one file or function over its limit.
type finding struct {
	pos   string // file or file:line
	what  string
	lines int
	limit int
}

func main() {
	maxFile := flag.Int("max-file", 500, "most lines of a non-test, non-generated Go file")
	maxFunc := flag.Int("max-func", 80, "most lines of a function without a "+marker+" line above it")
	flag.Parse()
	files, err := goFiles()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sizecheck:", err)
		os.Exit(2)
	}
	var found []finding
	for _, f := range files {
		fs, err := check(f, *maxFile, *maxFunc)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sizecheck:", err)
			os.Exit(2)
		}
		found = append(found, fs...)
	}
	sort.Slice(found, func(i, j int) bool { return found[i].pos < found[j].pos })
	for _, f := range found {
		fmt.Printf("%s: %s has %d lines (limit %d)\n", f.pos, f.what, f.lines, f.limit)
	}
	if len(found) > 0 {
		fmt.Printf("sizecheck: %d over the limits; split them, or put a %q line with the reason right above a long function\n", len(found), marker+" <reason>")
		os.Exit(1)
	}
	fmt.Printf("sizecheck: %d files, none over %d lines, no function over %d lines without a reason\n", len(files), *maxFile, *maxFunc)
}

// goFiles are the checked-in Go files that are not tests and not under a
// testdata directory.
func goFiles() ([]string, error) {
	out, err := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "*.go").Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	var files []string
	for _, f := range strings.Fields(string(out)) {
		if strings.HasSuffix(f, "_test.go") || strings.Contains("/"+f, "/testdata/") {
			continue
		}
		if _, err := os.Stat(f); err != nil { // deleted in the work tree
			continue
		}
		files = append(files, f)
	}
	return files, nil
}

// check returns the limits path breaks; generated files break none.
func check(path string, maxFile, maxFunc int) ([]finding, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	if ast.IsGenerated(file) {
		return nil, nil
	}
	var found []finding
	if n := bytes.Count(src, []byte("\n")); n > maxFile {
		found = append(found, finding{pos: path, what: "the file", lines: n, limit: maxFile})
	}
	lines := strings.Split(string(src), "\n")
	for _, d := range file.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
		if n := end - start + 1; n > maxFunc && !reasoned(lines, start) {
			found = append(found, finding{pos: fmt.Sprintf("%s:%d", path, start), what: "func " + name(fn), lines: n, limit: maxFunc})
		}
	}
	return found, nil
}

// reasoned tells whether the line above line (1-based) is a marker with
// a reason.
func reasoned(lines []string, line int) bool {
	if line < 2 {
		return false
	}
	above := strings.TrimSpace(lines[line-2])
	return strings.HasPrefix(above, marker) && strings.TrimSpace(strings.TrimPrefix(above, marker)) != ""
}

// name is fn's name, with its receiver's type for a method.
func name(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if ix, ok := t.(*ast.IndexListExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return "(" + id.Name + ")." + fn.Name.Name
	}
	return fn.Name.Name
}
