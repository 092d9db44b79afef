package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// groupAnnotation names the --help section a flag is listed in; flags
// without it are listed under "Flags:".
const groupAnnotation = "engagement_group"

// SetGroup puts every flag of fs that has none yet in the --help section
// title.
func SetGroup(fs *pflag.FlagSet, title string) {
	fs.VisitAll(func(f *pflag.Flag) {
		if len(f.Annotations[groupAnnotation]) == 0 {
			_ = fs.SetAnnotation(f.Name, groupAnnotation, []string{title})
		}
	})
}

// GroupedUsage is the usage function of the commands whose flags are
// grouped (SetGroup): cobra's layout, with each group in a section of its
// own after the ungrouped flags (groups in the order their first flag
// appears in the sorted list).
func GroupedUsage(cmd *cobra.Command) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage:\n  %s\n", cmd.UseLine())
	var titles []string
	sets := map[string]*pflag.FlagSet{"": pflag.NewFlagSet("", pflag.ContinueOnError)}
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
		title := ""
		if g := f.Annotations[groupAnnotation]; len(g) > 0 {
			title = g[0]
		}
		if sets[title] == nil {
			sets[title] = pflag.NewFlagSet(title, pflag.ContinueOnError)
			titles = append(titles, title)
		}
		sets[title].AddFlag(f)
	})
	section := func(title string, fs *pflag.FlagSet) {
		if fs.HasAvailableFlags() {
			fmt.Fprintf(&b, "\n%s:\n%s\n", title, strings.TrimRight(fs.FlagUsages(), " \n"))
		}
	}
	section("Flags", sets[""])
	for _, title := range titles {
		section(title, sets[title])
	}
	if cmd.HasAvailableInheritedFlags() {
		section("Global Flags", cmd.InheritedFlags())
	}
	_, err := fmt.Fprint(cmd.OutOrStderr(), b.String())
	return err
}
