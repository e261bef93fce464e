// Command apiusage lists the exported names (package-level, and the
// exported methods of exported types) of the packages given that nothing
// outside the package refers to, in the module at MODDIR (default: the
// current directory), its tests included:
//
//	cd ci/apiusage && MODDIR=../.. go run . github.com/gclock/gclock/lab github.com/gclock/gclock/lab/netlab
//
// A name in the list is API only if a user of the package needs it (a
// field's type, an error to match, a documented constant); the others can
// be unexported. Names used only through an interface (String, Error) are
// listed too. It is a separate module so that the main one does not depend
// on golang.org/x/tools.
package main

import (
	"fmt"
	"go/types"
	"os"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
)

func main() {
	targets := map[string]bool{}
	for _, a := range os.Args[1:] {
		targets[a] = true
	}
	cfg := &packages.Config{Dir: os.Getenv("MODDIR"), Mode: packages.NeedName | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedSyntax | packages.NeedFiles | packages.NeedImports, Tests: true}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		fmt.Fprintln(os.Stderr, "apiusage:", err)
		os.Exit(1)
	}
	decl := map[string][]types.Object{}
	seenDecl := map[types.Object]bool{}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			fmt.Fprintln(os.Stderr, e)
		}
		self := strings.TrimSuffix(strings.TrimSuffix(p.PkgPath, ".test"), "_test")
		if targets[self] && p.Types != nil && !strings.HasSuffix(p.Name, "_test") {
			sc := p.Types.Scope()
			for _, n := range sc.Names() {
				o := sc.Lookup(n)
				if !o.Exported() || seenDecl[o] || strings.HasSuffix(p.Fset.Position(o.Pos()).Filename, "_test.go") {
					continue
				}
				seenDecl[o] = true
				decl[self] = append(decl[self], o)
				if tn, ok := o.(*types.TypeName); ok {
					if nt, ok := tn.Type().(*types.Named); ok {
						for i := 0; i < nt.NumMethods(); i++ {
							m := nt.Method(i)
							if m.Exported() {
								decl[self] = append(decl[self], m)
							}
						}
					}
				}
			}
		}
		if p.TypesInfo == nil {
			continue
		}
		for _, o := range p.TypesInfo.Uses {
			if o == nil || o.Pkg() == nil {
				continue
			}
			op := o.Pkg().Path()
			if !targets[op] || op == self {
				continue
			}
			if f, ok := o.(*types.Func); ok {
				o = f.Origin()
			}
			outsideByName[o.Pkg().Path()+"."+name(o)]++
		}
	}
	for _, pk := range os.Args[1:] {
		// A package and its test variant declare the same names: count each once.
		names := map[string]bool{}
		var rows []string
		used, top := 0, 0
		for _, o := range decl[pk] {
			k := name(o)
			if names[k] {
				continue
			}
			names[k] = true
			if !strings.Contains(k, ".") {
				top++
			}
			n := outsideByName[pk+"."+k]
			if n > 0 {
				used++
				continue
			}
			rows = append(rows, fmt.Sprintf("%s\t%s", kind(o), k))
		}
		sort.Strings(rows)
		fmt.Printf("# %s: %d exported names (%d package-level, %d methods), %d referenced outside, %d not\n", pk, len(names), top, len(names)-top, used, len(rows))
		for _, r := range rows {
			fmt.Println(r)
		}
	}
}

// outsideByName counts the references to PKGPATH.NAME (NAME is TYPE.METHOD
// for a method) from other packages.
var outsideByName = map[string]int{}

func name(o types.Object) string {
	if f, ok := o.(*types.Func); ok {
		if sig, ok := f.Type().(*types.Signature); ok && sig.Recv() != nil {
			t := sig.Recv().Type()
			if p, ok := t.(*types.Pointer); ok {
				t = p.Elem()
			}
			if nt, ok := t.(*types.Named); ok {
				return nt.Obj().Name() + "." + f.Name()
			}
		}
	}
	return o.Name()
}

func kind(o types.Object) string {
	switch o.(type) {
	case *types.Func:
		return "func"
	case *types.TypeName:
		return "type"
	case *types.Var:
		return "var"
	case *types.Const:
		return "const"
	}
	return "?"
}
