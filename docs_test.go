package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/hookd/hookd/worker"
)

// The documents are held to the code here, so that a setting added to
// config.go, or a package moved, fails a test until the document says so.

// TestDocs_NamesExist holds the documents to the tree. On the pages that
// explain the code (docs/architecture.md, CONTRIBUTING.md) every name in
// backticks is checked by what it looks like:
//
//   - a path (`worker/receive.go`, `internal/store/accounts`, `views/*.templ`,
//     `migrations/00013_leases.sql`), written from the repository's root,
//     must exist;
//   - a Go name (`Receive`, `Lease.Release`) must be declared, at top level
//     or as a method or struct field, in the file named last before it in
//     its paragraph or table row, or in the package named last; with
//     neither, anywhere in the tree. A qualified one (`queue.ErrEventLocked`,
//     `receiver.Receiver.Recover`) must be declared in that package, and
//     leaves the context as it was;
//   - an ENVIRONMENT_VARIABLE or a snake_case SQL name must appear in the
//     code, the SQL or the scripts;
//   - a folder path in the package map's drawing must exist.
//
// Anything else in backticks (SQL, commands, status codes) is prose. The
// pages for those who run hookd (README.md and the rest of docs/) put
// values in backticks too (`invoice.paid`, `true`, `http/protobuf`), so
// there a name is checked only when it cannot be prose: a path under a
// file or folder of the repository must exist, a variable of hookd's own
// (HOOKD_..., STRIPE_..., DATABASE_URL) must appear in the code, and a
// test cited as evidence (`TestX`) must be declared.
func TestDocs_NamesExist(t *testing.T) {
	t.Parallel()
	tree := scanTree(t)
	for _, doc := range docPages(t) {
		checkNames(t, tree, doc, slices.Contains(codePages, doc))
	}
}

// codePages are the documents that explain the code, whose every name in
// backticks is a name of the tree.
var codePages = []string{"docs/architecture.md", "CONTRIBUTING.md"}

// docPages is every document held to the code: the README, CONTRIBUTING.md
// and every page under docs/.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pages, "docs/architecture.md") {
		t.Fatalf("docs/ has no architecture.md (its pages: %s)", strings.Join(pages, ", "))
	}
	return append([]string{"README.md", "CONTRIBUTING.md"}, pages...)
}

// checkUserName checks a name in backticks on a page for those who run
// hookd, where most are values, not names (see TestDocs_NamesExist).
func checkUserName(t *testing.T, tree *goTree, where, span string) {
	t.Helper()
	switch {
	case isDocPath(span):
		first, _, _ := strings.Cut(span, "/")
		if _, err := os.Stat(first); err != nil {
			return // not under the repository's files: a value, or a file of the server
		}
		if matches, _ := filepath.Glob(strings.TrimSuffix(span, "/")); len(matches) == 0 {
			t.Errorf("%s: `%s` is not in the tree (paths are written from the repository's root)", where, span)
		}
	case hookdVar.MatchString(span):
		if !tree.mentions(span) {
			t.Errorf("%s: `%s` appears nowhere in the code, the SQL or the scripts", where, span)
		}
	case testName.MatchString(span):
		if tree.whereIs(span) == "" {
			t.Errorf("%s: `%s` is declared nowhere in the tree", where, span)
		}
	}
}

var (
	hookdVar = regexp.MustCompile(`^(HOOKD_[A-Z0-9_]+|STRIPE_[A-Z0-9_]+|DATABASE_URL)$`)
	testName = regexp.MustCompile(`^Test[A-Z][A-Za-z0-9_]*$`)
)

func checkNames(t *testing.T, tree *goTree, doc string, full bool) {
	t.Helper()
	for _, block := range docBlocks(readLines(t, doc)) {
		if block.fenced {
			// Other pages' fenced blocks are examples (a shell session, an
			// nginx server, doctor's output), not drawings of the tree.
			if doc != "docs/architecture.md" {
				continue
			}
			for _, p := range drawnPath.FindAllString(block.text, -1) {
				if _, err := os.Stat(p); err != nil {
					t.Errorf("%s:%d: the package map draws %s, which is not a folder of the tree", doc, block.line, p)
				}
			}
			continue
		}
		var ctx struct{ dir, file string }
		for _, span := range codeSpans(block.text) {
			where := fmt.Sprintf("%s:%d", doc, block.line)
			if !full {
				checkUserName(t, tree, where, span)
				continue
			}
			switch {
			case isDocPath(span):
				p := strings.TrimSuffix(span, "/")
				matches, _ := filepath.Glob(p)
				if len(matches) == 0 {
					t.Errorf("%s: `%s` is not in the tree (paths are written from the repository's root)", where, span)
					ctx.dir, ctx.file = "", ""
					continue
				}
				ctx.dir, ctx.file = "", ""
				if len(matches) == 1 && strings.HasSuffix(p, ".go") {
					ctx.dir, ctx.file = filepath.Dir(p), p
				} else if tree.packages[filepath.Dir(matches[0])] != nil && !isDir(matches[0]) {
					ctx.dir = filepath.Dir(matches[0])
				} else if tree.packages[p] != nil {
					ctx.dir = p
				}
			case envName.MatchString(span) || sqlName.MatchString(span):
				if !tree.mentions(span) {
					t.Errorf("%s: `%s` appears nowhere in the code, the SQL or the scripts", where, span)
				}
			case goName.MatchString(span) && strings.ContainsAny(span, "abcdefghijklmnopqrstuvwxyz"):
				name := span
				// pkg.Name and pkg.Type.Method name a package of the tree
				// (unless pkg is a type in context, as in Lease.Release), and
				// leave the context as it is: they are references.
				if pkg, rest, ok := strings.Cut(span, "."); ok && len(tree.byName[pkg]) > 0 && !tree.isType(ctx.dir, pkg) {
					if !slices.ContainsFunc(tree.byName[pkg], func(d string) bool { return tree.packages[d][rest] != nil }) {
						t.Errorf("%s: `%s`: package %s (%s) declares no %s%s", where, span, pkg, strings.Join(tree.byName[pkg], ", "), rest, tree.whereIs(rest))
					}
					continue
				}
				switch {
				case ctx.file != "":
					if !tree.files[ctx.file][name] {
						t.Errorf("%s: `%s` is not declared in %s, the file named before it%s", where, span, ctx.file, tree.whereIs(name))
					}
				case ctx.dir != "":
					if tree.packages[ctx.dir][name] == nil {
						t.Errorf("%s: `%s` is not declared in package %s, the folder named before it%s", where, span, ctx.dir, tree.whereIs(name))
					}
				default:
					if tree.whereIs(name) == "" {
						t.Errorf("%s: `%s` is declared nowhere in the tree (write it without backticks if it is not a Go name)", where, span)
					}
				}
			}
		}
	}
}

var (
	// A path written from the root: segments of file-name characters, one
	// of them with a slash or a file extension; a leading slash is a route,
	// <x> and ... are placeholders.
	docPath   = regexp.MustCompile(`^[A-Za-z0-9_.*-]+(/[A-Za-z0-9_.*-]+)*/?$`)
	docExt    = regexp.MustCompile(`\.(go|sql|templ|md|sh|env|css|js|mod|sum)$`)
	drawnPath = regexp.MustCompile(`\b[a-z][a-z0-9]*(/[a-z][a-z0-9]*)+\b`)
	envName   = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$`)
	sqlName   = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)+$`)
	goName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}$`)
)

func isDocPath(span string) bool {
	if !docPath.MatchString(span) || strings.Contains(span, "...") {
		return false
	}
	if strings.Contains(span, "/") || docExt.MatchString(span) {
		return true
	}
	return isDir(span) // a top-level folder: `web`, `queue`
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// goTree is every Go declaration of the tree: top-level names, methods as
// Type.Method and Method, struct fields as Type.Field and Field.
type goTree struct {
	files    map[string]map[string]bool     // file → names
	packages map[string]map[string][]string // folder → name → files
	byName   map[string][]string            // package name → folders
	text     string                         // the code, SQL and scripts
}

func scanTree(t *testing.T) *goTree {
	t.Helper()
	tree := &goTree{files: map[string]map[string]bool{}, packages: map[string]map[string][]string{}, byName: map[string][]string{}}
	fset := token.NewFileSet()
	var text strings.Builder
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") && d.Name() != ".ci" || d.Name() == "bin" || d.Name() == "test-output" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, ".go"):
		case docExt.MatchString(path) && !strings.HasSuffix(path, ".md"), d.Name() == "Makefile", strings.HasPrefix(path, ".ci/"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			text.Write(b)
			return nil
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text.Write(b)
		f, err := parser.ParseFile(fset, path, b, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		pkg := strings.TrimSuffix(f.Name.Name, "_test")
		if !slices.Contains(tree.byName[pkg], dir) {
			tree.byName[pkg] = append(tree.byName[pkg], dir)
		}
		names := map[string]bool{}
		add := func(name string) { names[name] = true }
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				add(decl.Name.Name)
				if decl.Recv != nil && len(decl.Recv.List) == 1 {
					if recv := receiverType(decl.Recv.List[0].Type); recv != "" {
						add(recv + "." + decl.Name.Name)
					}
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						add(spec.Name.Name)
						add("type " + spec.Name.Name)
						for _, field := range fieldsOf(spec.Type) {
							add(field)
							add(spec.Name.Name + "." + field)
						}
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							add(n.Name)
						}
					}
				}
			}
		}
		tree.files[path] = names
		if tree.packages[dir] == nil {
			tree.packages[dir] = map[string][]string{}
		}
		for n := range names {
			tree.packages[dir][n] = append(tree.packages[dir][n], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tree.text = text.String()
	return tree
}

func receiverType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverType(e.X)
	case *ast.IndexExpr:
		return receiverType(e.X)
	case *ast.IndexListExpr:
		return receiverType(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// fieldsOf names a struct's fields and an interface's methods.
func fieldsOf(e ast.Expr) []string {
	var list *ast.FieldList
	switch e := e.(type) {
	case *ast.StructType:
		list = e.Fields
	case *ast.InterfaceType:
		list = e.Methods
	default:
		return nil
	}
	var names []string
	for _, f := range list.List {
		for _, n := range f.Names {
			names = append(names, n.Name)
		}
		if len(f.Names) == 0 { // embedded
			if n := receiverType(f.Type); n != "" {
				names = append(names, n)
			}
		}
	}
	return names
}

// isType reports whether name is a type of the package in context, so that
// `Lease.Release` after `queue/leases.go` is a method, not a package's name.
func (tree *goTree) isType(dir, name string) bool {
	return dir != "" && tree.packages[dir]["type "+name] != nil
}

// whereIs says where name is declared, for a failure message.
func (tree *goTree) whereIs(name string) string {
	var at []string
	for _, files := range tree.packages {
		at = append(at, files[name]...)
	}
	if len(at) == 0 {
		return ""
	}
	slices.Sort(at)
	return " (it is in " + strings.Join(at, ", ") + ")"
}

func (tree *goTree) mentions(s string) bool { return strings.Contains(tree.text, s) }

type docBlock struct {
	text   string
	line   int
	fenced bool
}

// docBlocks cuts a Markdown document into paragraphs, table rows and fenced
// blocks: the units a name's context is taken from.
func docBlocks(lines []string) []docBlock {
	var blocks []docBlock
	var cur *docBlock
	flush := func() {
		if cur != nil {
			blocks = append(blocks, *cur)
			cur = nil
		}
	}
	fenced := false
	for i, line := range lines {
		switch {
		case strings.HasPrefix(line, "```"):
			if fenced {
				fenced = false
				flush()
				continue
			}
			flush()
			fenced = true
			cur = &docBlock{line: i + 1, fenced: true}
		case fenced:
			cur.text += line + "\n"
		case strings.TrimSpace(line) == "", strings.HasPrefix(line, "#"):
			flush()
		case strings.HasPrefix(line, "|"), strings.HasPrefix(line, "- "):
			flush()
			cur = &docBlock{text: line + "\n", line: i + 1}
		default:
			if cur == nil {
				cur = &docBlock{line: i + 1}
			}
			cur.text += line + "\n"
		}
	}
	flush()
	return blocks
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

func codeSpans(s string) []string {
	var spans []string
	for _, m := range codeSpan.FindAllStringSubmatch(s, -1) {
		spans = append(spans, m[1])
	}
	return spans
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestDocs_LinksResolve holds the links between the documents to their
// files and headings, so that a heading renamed in one breaks no link in
// another.
func TestDocs_LinksResolve(t *testing.T) {
	t.Parallel()
	for _, doc := range append(docPages(t), ".ci/bench/README.md") {
		for n, line := range readLines(t, doc) {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				path := doc
				if file != "" {
					path = filepath.Join(filepath.Dir(doc), file)
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: the link to %s finds no file %s", doc, n+1, target, path)
					continue
				}
				if anchor != "" && !slices.Contains(headingAnchors(t, path), anchor) {
					t.Errorf("%s:%d: the link to %s finds no heading #%s in %s (its headings: %s)",
						doc, n+1, target, anchor, path, strings.Join(headingAnchors(t, path), ", "))
				}
			}
		}
	}
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// headingAnchors lists a Markdown file's headings as GitHub links them:
// lower case, punctuation dropped, spaces as hyphens.
func headingAnchors(t *testing.T, path string) []string {
	t.Helper()
	var anchors []string
	fenced := false
	for _, line := range readLines(t, path) {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		anchors = append(anchors, anchorOf(line))
	}
	return anchors
}

// anchorOf is a Markdown heading's anchor as GitHub makes it: lower case,
// punctuation dropped, spaces as hyphens.
func anchorOf(heading string) string {
	title := strings.ToLower(strings.TrimSpace(strings.TrimLeft(heading, "#")))
	var b strings.Builder
	for _, r := range title {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestArchitecture_PackageMapMatchesGoList holds docs/architecture.md's package
// map to the code: the map's lines (a package, "→", the packages of hookd
// its production code imports, continued on indented lines) must be, one
// for one, what `go list` says of every package of the module.
func TestArchitecture_PackageMapMatchesGoList(t *testing.T) {
	t.Parallel()
	drawn := readPackageMap(t, "docs/architecture.md")

	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/hookd/hookd"
	short := func(path string) string {
		if path == module {
			return "main"
		}
		return strings.TrimPrefix(path, module+"/")
	}
	listed := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		var ours []string
		for _, imp := range fields[1:] {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				ours = append(ours, short(imp))
			}
		}
		slices.Sort(ours)
		listed[short(fields[0])] = ours
	}
	for pkg, imports := range listed {
		got, ok := drawn[pkg]
		switch {
		case !ok:
			t.Errorf("docs/architecture.md's package map has no line for %s, which imports %s", pkg, packageList(imports))
		case !slices.Equal(got, imports):
			t.Errorf("docs/architecture.md's package map says %s imports %s; go list says %s", pkg, packageList(got), packageList(imports))
		}
	}
	for pkg := range drawn {
		if _, ok := listed[pkg]; !ok {
			t.Errorf("docs/architecture.md's package map has a line for %s, which go list does not know", pkg)
		}
	}
}

func packageList(pkgs []string) string {
	if len(pkgs) == 0 {
		return "(none)"
	}
	return strings.Join(pkgs, ", ")
}

// readPackageMap reads the first fenced block under "## The package map":
// each package and the imports its line names, sorted.
func readPackageMap(t *testing.T, path string) map[string][]string {
	t.Helper()
	lines := readLines(t, path)
	start := slices.Index(lines, "## The package map")
	if start < 0 {
		t.Fatalf("%s has no \"## The package map\" heading", path)
	}
	drawn := map[string][]string{}
	var last string
	fenced := false
	for n, line := range lines[start+1:] {
		if strings.HasPrefix(line, "```") {
			if fenced {
				break
			}
			fenced = true
			continue
		}
		if !fenced || strings.TrimSpace(line) == "" {
			continue
		}
		deps := line
		if !strings.HasPrefix(line, " ") {
			pkg, rest, ok := strings.Cut(line, "→")
			if !ok {
				t.Fatalf("%s:%d: a line of the package map without \"→\": %s", path, start+n+2, line)
			}
			last, deps = strings.TrimSpace(pkg), rest
			if _, dup := drawn[last]; dup {
				t.Errorf("%s:%d: the package map has two lines for %s", path, start+n+2, last)
			}
			drawn[last] = nil
		}
		for dep := range strings.SplitSeq(deps, ",") {
			if dep = strings.TrimSpace(dep); dep != "" && dep != "(none)" {
				drawn[last] = append(drawn[last], dep)
			}
		}
	}
	if len(drawn) == 0 {
		t.Fatalf("%s has no package map under \"## The package map\"", path)
	}
	for pkg := range drawn {
		slices.Sort(drawn[pkg])
	}
	return drawn
}

// TestArchitecture_EnvironmentReaders holds docs/architecture.md's list of the
// files that read the environment (the Go files, tests aside, named in its
// paragraph "The environment.") to the production code that calls os.Getenv,
// os.LookupEnv or os.Environ.
func TestArchitecture_EnvironmentReaders(t *testing.T) {
	t.Parallel()
	named := map[string]bool{}
	for _, block := range docBlocks(readLines(t, "docs/architecture.md")) {
		if strings.HasPrefix(block.text, "**The environment.**") {
			for _, span := range codeSpans(block.text) {
				// A test file named there is the test that holds it.
				if strings.HasSuffix(span, ".go") && !strings.HasSuffix(span, "_test.go") {
					named[span] = true
				}
			}
		}
	}
	if len(named) == 0 {
		t.Fatal("docs/architecture.md has no paragraph \"**The environment.**\" naming the files that read it")
	}
	readers := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Dot folders hold other modules (.ci/bench/river) and caches.
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "test-output" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "os" && slices.Contains([]string{"Getenv", "LookupEnv", "Environ"}, sel.Sel.Name) {
				readers[filepath.ToSlash(path)] = true
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for path := range readers {
		if !named[path] {
			t.Errorf("%s reads the environment, but docs/architecture.md's \"The environment.\" does not name it", path)
		}
	}
	for path := range named {
		if !readers[path] {
			t.Errorf("docs/architecture.md's \"The environment.\" names %s, which does not read the environment", path)
		}
	}
}

// TestQueueDoc_ListsEveryFile holds queue/doc.go's map of the package to
// the tree: every file it names is in queue/, and every file of queue/
// (besides its tests and doc.go itself) is named.
func TestQueueDoc_ListsEveryFile(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "queue/doc.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	// The map is the comment below the package clause: the package doc
	// itself stays short (TestPackages_DocsAreShort).
	named := map[string]bool{}
	for _, c := range f.Comments {
		for _, name := range goFileName.FindAllString(c.Text(), -1) {
			named[name] = true
		}
	}
	if len(named) == 0 {
		t.Fatal("queue/doc.go has no map of the package's files")
	}
	entries, err := os.ReadDir("queue")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{}
	for _, e := range entries {
		if name := e.Name(); !e.IsDir() && strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			files[name] = true
		}
	}
	for name := range named {
		if !files[name] {
			t.Errorf("queue/doc.go names %s, which is not a file of queue/", name)
		}
	}
	for name := range files {
		if !named[name] && name != "doc.go" {
			t.Errorf("queue/%s is not named in queue/doc.go's map of the package", name)
		}
	}
}

var goFileName = regexp.MustCompile(`\b[a-z0-9_]+\.go\b`)

// TestPackages_DocsAreShort holds every package's doc to its one concept in
// at most three sentences, so `go doc` says what a package is before a
// newcomer opens it. The detail a package needs goes below its package
// clause, or on the names it is about. Commands keep their usage.
func TestPackages_DocsAreShort(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", "{{.Name}} {{.Dir}} {{join .GoFiles \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	sentenceEnd := regexp.MustCompile(`[.!?]["')]?(\s|$)`)
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		name, dir := fields[0], fields[1]
		if name == "main" {
			continue
		}
		files := map[string]*ast.File{}
		for _, file := range fields[2:] {
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, file), nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Fatal(err)
			}
			files[file] = f
		}
		var docs []string
		for file, f := range files {
			// A generated file's header (oapi-codegen writes one like a
			// package doc) is the generator's, not the package's doc.
			if f.Doc != nil && !generated.MatchString(f.Doc.Text()) {
				docs = append(docs, filepath.Base(file))
				var prose []string
				for l := range strings.Lines(f.Doc.Text()) {
					if !strings.HasPrefix(l, "\t") { // a code block is no sentence
						prose = append(prose, l)
					}
				}
				text := strings.NewReplacer("e.g.", "eg", "i.e.", "ie").Replace(strings.Join(prose, ""))
				if n := len(sentenceEnd.FindAllString(text, -1)); n > 3 {
					t.Errorf("package %s (%s): its doc has %d sentences; say its one concept in at most 3, the rest below the package clause",
						name, filepath.Base(file), n)
				}
			}
		}
		switch {
		case len(docs) == 0:
			t.Errorf("package %s (%s) has no package doc", name, dir)
		case len(docs) > 1:
			t.Errorf("package %s has a package doc in %d files (%s): keep one", name, len(docs), strings.Join(docs, ", "))
		}
	}
}

// generated matches the line Go's convention marks generated files with.
var generated = regexp.MustCompile(`(?m)^Code generated .* DO NOT EDIT\.$`)

// TestReadme_FitsInFiveMinutes holds README.md to 150 lines: what hookd is,
// the two commands, the first five minutes, the production path, what an
// app receives and the links to docs/. The reference lives under docs/.
func TestReadme_FitsInFiveMinutes(t *testing.T) {
	t.Parallel()
	const most = 150
	if n := len(readLines(t, "README.md")); n > most {
		t.Errorf("README.md has %d lines, over %d: move the detail to a page of docs/ and link to it", n, most)
	}
}

// TestDocs_EveryPageHasATableOfContents holds each page of docs/ to a table
// of contents at its top: before its first section, a list of links to its
// sections (its "## " headings), every one of them, in their order.
func TestDocs_EveryPageHasATableOfContents(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range pages {
		var listed, sections []string
		fenced := false
		for _, line := range readLines(t, page) {
			if strings.HasPrefix(line, "```") {
				fenced = !fenced
			}
			switch {
			case fenced:
			case strings.HasPrefix(line, "## "):
				sections = append(sections, anchorOf(line))
			case len(sections) == 0 && strings.HasPrefix(line, "- ["):
				if m := tocEntry.FindStringSubmatch(line); m != nil {
					listed = append(listed, m[1])
				}
			}
		}
		if len(sections) == 0 {
			t.Errorf("%s has no sections (## headings) for a table of contents to list", page)
			continue
		}
		if !slices.Equal(listed, sections) {
			t.Errorf("%s: the table of contents at its top lists %s; its sections are %s",
				page, packageList(listed), packageList(sections))
		}
	}
}

var tocEntry = regexp.MustCompile(`^- \[[^]]+\]\(#([^)]+)\)$`)

// TestReadme_ListsEveryForwardedHeader holds the README's "What your app
// receives" to the forwarder: every header a delivery carries (with every
// field of the Delivery set, and a signing secret) is named there in
// backticks. Content-Length and Accept-Encoding are net/http's own.
func TestReadme_ListsEveryForwardedHeader(t *testing.T) {
	t.Parallel()
	var section strings.Builder
	in := false
	for _, line := range readLines(t, "README.md") {
		if strings.HasPrefix(line, "## ") {
			in = line == "## What your app receives"
		}
		if in {
			section.WriteString(line + "\n")
		}
	}
	if section.Len() == 0 {
		t.Fatal(`README.md has no section "## What your app receives"`)
	}
	named := map[string]bool{}
	for _, span := range codeSpans(section.String()) {
		name, _, _ := strings.Cut(span, ":")
		named[http.CanonicalHeaderKey(name)] = true
	}

	got := make(chan http.Header, 1)
	app := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	// One call: the connection closes with it, and leaves no goroutine of
	// the forwarder's client behind for the package's leak check.
	app.Config.SetKeepAlivesEnabled(false)
	app.Start()
	defer app.Close()
	f, err := worker.NewForwarder(app.URL, "whsec_"+base64.StdEncoding.EncodeToString([]byte("a key for the docs test")))
	if err != nil {
		t.Fatal(err)
	}
	live := true
	res := f.Process(context.Background(), worker.Delivery{
		EventID: "evt_1", EventType: "invoice.paid", Payload: []byte(`{"id":"evt_1"}`), Attempt: 1,
		Endpoint: "connect", Livemode: &live, Account: "acct_1", Replay: "app bug fix",
	})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	for name := range <-got {
		if name == "Content-Length" || name == "Accept-Encoding" {
			continue
		}
		if !named[name] {
			t.Errorf("the forwarder sends %s, which README.md's \"What your app receives\" does not name", name)
		}
	}
}

// TestDocs_DashboardPageSpeaksASupportPersonsWords holds docs/dashboard.md,
// the page support staff read, to the words on the pages: none of the
// code's words that the glossary (the "not" column) keeps off them.
func TestDocs_DashboardPageSpeaksASupportPersonsWords(t *testing.T) {
	t.Parallel()
	const page = "docs/dashboard.md"
	notWords := []string{"processed marker", "deferred", "rejected", "leased", "in flight", "stuck", "claimed twice"}
	for n, line := range readLines(t, page) {
		lower := strings.ToLower(line)
		for _, w := range notWords {
			if strings.Contains(lower, w) {
				t.Errorf("%s:%d: %q is the code's word; the page says what support staff say (the glossary)", page, n+1, w)
			}
		}
	}
}

// TestReadme_LinksEveryDocsPage: the README is the way in, so every page
// of docs/ is linked from it.
func TestReadme_LinksEveryDocsPage(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, line := range readLines(t, "README.md") {
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			file, _, _ := strings.Cut(m[1], "#")
			linked[filepath.Clean(file)] = true
		}
	}
	for _, page := range pages {
		if !linked[page] {
			t.Errorf("README.md does not link %s", page)
		}
	}
}
