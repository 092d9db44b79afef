package console

import (
	"context"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 47: a page is one declaration. The table, the templates and the
// routes agree: every template (but the layout) is a page of the table and
// every page has its template, each routed page gets its data one way
// (its data: a snapshotOf or a liveOf, typed), routes are distinct, and
// every template parses with the functions its row declares.
func TestEveryPageIsOneDeclaration(t *testing.T) {
	t.Parallel()
	declared, routes := map[string]bool{}, map[string]bool{}
	for _, p := range pages {
		switch {
		case declared[p.name]:
			t.Errorf("page %s is declared twice", p.name)
		case p.title == "":
			t.Errorf("page %s has no title", p.name)
		case p.route == "" && (p.nav || p.data != nil):
			t.Errorf("page %s has no route, yet its data or a place in the navigation", p.name)
		case p.route != "" && p.data == nil:
			t.Errorf("page %s: %s has no data (a snapshotOf or a liveOf)", p.name, p.route)
		case p.route != "" && (!strings.HasPrefix(p.route, "GET /") || routes[p.route]):
			t.Errorf("page %s: route %q is not a GET, or another page's", p.name, p.route)
		}
		declared[p.name], routes[p.route] = true, p.route != ""
	}
	entries, err := fs.ReadDir(templateFiles, "templates")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".html")
		if name != "layout" && !declared[name] {
			t.Errorf("templates/%s has no row in the table of pages", e.Name())
		}
		delete(declared, name)
	}
	for name := range declared {
		t.Errorf("page %s has no templates/%s.html", name, name)
	}
	if _, err := parsePages(templateFiles, pages); err != nil {
		t.Error(err)
	}
}

// Issue 47: the recipe of docs/development.md, "Adding a console page",
// carried out. A new page is its row (route, title, navigation, loader,
// chart functions), its template and its statement, typed by make sql;
// the row, the template and the statement below are all this test adds. The page is served with its
// title, its data (read in the console's read-only transaction) and its
// page-only function, listed in every page's navigation, and answers JSON
// too. A template using a function its row does not declare fails at
// start.
func TestANewPageIsOneDeclaration(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	type Example struct {
		Greeting string `json:"greeting"`
		Users    int64  `json:"users"`
	}
	example := page{name: "example", title: "Example", route: "GET /example", nav: true,
		data: liveOf[Example]{load: func(s *server, r *http.Request, src source) (Example, error) {
			out := Example{Greeting: "olá"}
			err := src.read(r.Context(), func(tx pgx.Tx, _ time.Time) error {
				row, err := exampleQuery.One(r.Context(), tx, sqlfile.None{})
				out.Users = row.Users
				return err
			})
			return out, err
		}},
		charts: template.FuncMap{"shout": strings.ToUpper}}
	files := fstest.MapFS{"templates/example.html": {Data: []byte(
		`{{define "content"}}<p id="greeting">{{shout .Data.Greeting}}</p><p id="users">{{.Data.Users}}</p>{{end}}`)}}
	if err := fs.WalkDir(templateFiles, "templates", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, err := fs.ReadFile(templateFiles, path)
			files[path] = &fstest.MapFile{Data: b}
			return err
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Pool: pool, Logger: zerolog.New(zerolog.NewTestWriter(t))}
	c, err := newConsole(cfg, append(slices.Clone(pages), example), files)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	get := func(path, accept string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Accept", accept)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	html := get("/example", "text/html")
	for _, want := range []string{"<title>Example · engagement console</title>", `<p id="greeting">OLÁ</p>`, `<p id="users">0</p>`,
		`<a href="/example" aria-current="page">Example</a>`} {
		if !strings.Contains(html, want) {
			t.Errorf("GET /example lacks %s:\n%s", want, html)
		}
	}
	if audit := get("/audit", "text/html"); !strings.Contains(audit, `<a href="/example" >Example</a>`) {
		t.Errorf("another page's navigation lacks the new page:\n%s", audit)
	}
	if js := get("/example", "application/json"); !strings.Contains(js, `"greeting":"olá"`) {
		t.Errorf("GET /example as JSON: %s", js)
	}

	example.charts = nil
	if _, err := newConsole(cfg, append(slices.Clone(pages), example), files); err == nil || !strings.Contains(err.Error(), "shout") {
		t.Errorf("a template using an undeclared function: %v; want the start refused, naming it", err)
	}

	// The statement's third file, queries/example.sql: make sql types it
	// as exampleQuery below declares it.
	gen, err := sqlfile.Generate(context.Background(), pgtest.NewTx(t).Conn(), "console",
		fstest.MapFS{"queries/example.sql": {Data: []byte(exampleSQL)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"type exampleRow struct {\n\tUsers int64 // users\n}",
		`var exampleQuery = sqlfile.Load[sqlfile.None, exampleRow, *exampleRow](statementFiles, "example")`} {
		if !strings.Contains(string(gen), want) {
			t.Errorf("make sql makes of queries/example.sql:\n%s\nwant it to declare %s", gen, want)
		}
	}
}

// exampleSQL is TestANewPageIsOneDeclaration's queries/example.sql, and
// exampleRow and exampleQuery what make sql writes for it in
// queries.gen.go (the test checks that it does).
const exampleSQL = `-- The users, for the example page.
SELECT count(*) AS users FROM user_profiles;
`

type exampleRow struct {
	Users int64 // users
}

func (r *exampleRow) Dest() []any { return []any{&r.Users} }

var exampleQuery = sqlfile.Statement[sqlfile.None, exampleRow, *exampleRow]{Name: "example", SQL: exampleSQL}
