package console

import (
	"html/template"
	"unicode/utf8"

	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// pages is the console's table of pages (page.go), in the navigation's
// order. A new page is its row, its data type and loader in a file of its
// own (<name>.go), its template and its statement (docs/development.md,
// "Adding a console page").
var pages = []page{
	{name: "overview", title: "Overview", route: "GET /{$}", nav: true,
		data:   snapshotOf[Overview]{load: (*server).overview, served: (*server).withHealth},
		charts: merged(template.FuncMap{"statesChart": statesChart, "funnelChart": funnelChart, "reviewsChart": reviewsChart}, liftFuncs)},
	{name: "queue", title: "Queue", route: "GET /queue", nav: true,
		data:   snapshotOf[Queue]{load: (*server).queue, keep: func(c *snapshots) **cache[Queue] { return &c.queue }},
		charts: template.FuncMap{"throughputChart": throughputChart, "whatsAppMeaning": WhatsAppMeaning}},
	{name: "runs", title: "Runs", route: "GET /runs", nav: true, data: liveOf[Runs]{load: (*server).runs},
		charts: template.FuncMap{"runsCharts": runsCharts, "runsPerJob": func() int { return RunsPerJob }}},
	{name: "verify", title: "Verify", route: "GET /verify", nav: true,
		data: snapshotOf[Verify]{load: (*server).verify, keep: func(c *snapshots) **cache[Verify] { return &c.verify }}},
	{name: "user", title: "User", route: "GET /users", nav: true,
		data:   liveOf[User]{load: (*server).user, post: (*server).searchUser},
		charts: template.FuncMap{"kinds": sm.Kinds}},
	{name: "forecast", title: "Forecast", route: "GET /forecast", nav: true,
		// A dry run of the daily job: on the primary, replica or not.
		data:   snapshotOf[Forecast]{load: (*server).forecast, primary: true},
		charts: template.FuncMap{"forecastChart": forecastChart}},
	{name: "audit", title: "Audit", route: "GET /audit", nav: true, data: liveOf[Audit]{load: (*server).audit}},
	{name: "error", title: "Error"},
	{name: "preview", title: "Confirm"},
	{name: "done", title: "Done"},
}

// truncate shortens s to at most n runes, marking the cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
