// Command codestats prints the size figures of issue 36 for a folder of Go code: its non-test
// lines (every line of each .go file that is not a _test.go, as wc -l counts them) and its
// longest functions (lines from the func keyword to the closing brace, go/ast positions), so
// that "before" and "after" are measured by the same code.
//
//	go run ./tools/codestats [-top 10] DIR...
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ragtrain/ragtrain/tools/internal/cli"
)

// fn is one function or method and its length in lines.
type fn struct {
	name  string // pkgdir/file.go:line Recv.Name
	lines int
}

func main() {
	top := flag.Int("top", 10, "how many of the longest functions to print")
	flag.Parse()
	for _, dir := range flag.Args() {
		lines, fns, err := measure(dir)
		cli.Check("codestats", err)
		fmt.Printf("%s: %d non-test lines, %d functions\n", dir, lines, len(fns))
		sort.SliceStable(fns, func(i, j int) bool { return fns[i].lines > fns[j].lines })
		for i := 0; i < *top && i < len(fns); i++ {
			fmt.Printf("  %4d  %s\n", fns[i].lines, fns[i].name)
		}
	}
}

// measure walks dir's non-test Go files.
func measure(dir string) (int, []fn, error) {
	var total int
	var fns []fn
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		total += bytes.Count(src, []byte("\n"))
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) > 0 {
				name = recv(fd.Recv.List[0].Type) + "." + name
			}
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			fns = append(fns, fn{fmt.Sprintf("%s:%d %s", path, start.Line, name), end.Line - start.Line + 1})
		}
		return nil
	})
	return total, fns, err
}

// recv names a method's receiver type.
func recv(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recv(t.X)
	case *ast.IndexExpr:
		return recv(t.X)
	case *ast.IndexListExpr:
		return recv(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}
