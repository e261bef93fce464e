package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/gclock/gclock/cmd/internal/usage"
)

func init() {
	register("completion", "print a shell completion script (bash, zsh or fish)", func(args []string) error {
		return runCompletion(args, os.Stdout, os.Stderr)
	})
}

const completionUsage = `usage: gclock completion bash|zsh|fish

Prints a script that completes gclock's commands, their subcommands and flags
in the shell, generated from the commands this binary has. To load it:

  bash:  source <(gclock completion bash)        # or save it as
         /etc/bash_completion.d/gclock
  zsh:   source <(gclock completion zsh)         # or save it as _gclock in
         a directory of $fpath
  fish:  gclock completion fish | source         # or save it as
         ~/.config/fish/completions/gclock.fish

flags:
`

// compFlag is one flag of a command, for completion: its values when its
// usage lists them (`text|json`, "star|tree|ring").
type compFlag struct {
	name, usage string
	values      []string
}

// compCmd is one command with its subcommands and flags, for completion.
type compCmd struct {
	name, summary string
	subs          []string
	flags         []compFlag
	subFlags      map[string][]compFlag // flags of `gclock NAME SUB`
}

var (
	// A flag in flag.PrintDefaults output: "  -name type", then its usage
	// on lines starting with "    \t".
	flagLine  = regexp.MustCompile(`^  -([A-Za-z0-9][A-Za-z0-9_.-]*)(?: .*)?$`)
	usageLine = regexp.MustCompile(`^    \t(.*)$`)
	// A boolean flag with a one-letter name: "  -q\tusage" on one line.
	shortLine = regexp.MustCompile(`^  -([A-Za-z0-9])\t(.*)$`)
	// Values listed in a usage: a|b|c (lower-case words, two or more).
	choices = regexp.MustCompile(`\b[a-z][a-z0-9-]*(?:\|[a-z][a-z0-9-]*)+\b`)
)

// listed: values after a colon at the end of a usage ("the topology: star,
// tree, ring").
var listed = regexp.MustCompile(`:\s*([a-z][a-z0-9-]*(?:,\s*[a-z][a-z0-9-]*)+)\s*$`)

// flagValues returns the values a flag's usage lists, if any.
func flagValues(usage string) []string {
	if m := listed.FindStringSubmatch(usage); m != nil {
		return strings.FieldsFunc(m[1], func(r rune) bool { return r == ',' || r == ' ' })
	}
	m := choices.FindString(usage)
	if m == "" {
		return nil
	}
	return strings.Split(m, "|")
}

// completionModel asks every registered command for its help (as
// `gclock CMD -h` prints it) and reads its flags and subcommands from it, so
// completion follows the commands without a second list to keep.
func completionModel() []compCmd {
	var out []compCmd
	for _, n := range commandNames() {
		c := commands[n]
		cc := compCmd{name: n, summary: c.summary}
		switch n {
		case "help":
			cc.subs = commandNames()
		case "completion":
			cc.subs = []string{"bash", "zsh", "fish"}
		}
		if n != "help" && n != "completion" {
			text, _ := helpText(c, nil)
			cc.flags, cc.subs = parseHelp(n, text)
			for _, sub := range cc.subs {
				st, err := helpText(c, []string{sub})
				if err != nil {
					continue
				}
				if f, _ := parseHelp(n+" "+sub, st); len(f) > 0 {
					if cc.subFlags == nil {
						cc.subFlags = map[string][]compFlag{}
					}
					cc.subFlags[sub] = f
				}
			}
		}
		out = append(out, cc)
	}
	return out
}

// parseHelp reads the flags (flag.PrintDefaults' format) and the subcommands
// ("gclock NAME SUB ..." in a usage line) of a command's help text.
func parseHelp(name, text string) (flags []compFlag, subs []string) {
	subRe := regexp.MustCompile(`^\s*(?:usage:)?\s*gclock ` + regexp.QuoteMeta(name) + ` ([a-z][a-z0-9-]*)\b`)
	seenSub := map[string]bool{}
	seenFlag := map[string]bool{}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if m := subRe.FindStringSubmatch(l); m != nil && !seenSub[m[1]] {
			seenSub[m[1]] = true
			subs = append(subs, m[1])
			continue
		}
		if m := shortLine.FindStringSubmatch(l); m != nil && !seenFlag[m[1]] {
			seenFlag[m[1]] = true
			flags = append(flags, compFlag{name: m[1], usage: strings.TrimSpace(m[2])})
			continue
		}
		m := flagLine.FindStringSubmatch(l)
		if m == nil || i+1 >= len(lines) || seenFlag[m[1]] {
			continue
		}
		u := usageLine.FindStringSubmatch(lines[i+1])
		if u == nil {
			continue
		}
		seenFlag[m[1]] = true
		flags = append(flags, compFlag{name: m[1], usage: strings.TrimSpace(u[1]), values: flagValues(u[1])})
	}
	return flags, subs
}

// runCompletion is `gclock completion SHELL`.
func runCompletion(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("completion", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, completionUsage); fs.PrintDefaults() }
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("want one shell: bash, zsh or fish (got %d arguments)", fs.NArg())
	}
	model := completionModel()
	w := bufio.NewWriter(stdout)
	switch fs.Arg(0) {
	case "bash":
		writeBash(w, model)
	case "zsh":
		writeZsh(w, model)
	case "fish":
		writeFish(w, model)
	default:
		return fmt.Errorf("unknown shell %q (bash, zsh, fish)", fs.Arg(0))
	}
	return w.Flush()
}

func flagNames(flags []compFlag) string {
	var b []string
	for _, f := range flags {
		b = append(b, "-"+f.name)
	}
	return strings.Join(b, " ")
}

func writeBash(w io.Writer, model []compCmd) {
	var names []string
	for _, c := range model {
		names = append(names, c.name)
	}
	fmt.Fprintf(w, `# bash completion for gclock; generated by 'gclock completion bash'.
# Load with: source <(gclock completion bash)
_gclock() {
    local cur=${COMP_WORDS[COMP_CWORD]}
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W %q -- "$cur"))
        return
    fi
    local flags="" subs=""
    case ${COMP_WORDS[1]} in
`, strings.Join(names, " "))
	for _, c := range model {
		fmt.Fprintf(w, "    %s) flags=%q; subs=%q ;;\n", c.name, flagNames(c.flags), strings.Join(c.subs, " "))
	}
	fmt.Fprint(w, `    esac
    # A subcommand's own flags (gclock lab bench -...).
    case "${COMP_WORDS[1]} ${COMP_WORDS[2]}" in
`)
	for _, c := range model {
		for _, sub := range c.subs {
			if f := c.subFlags[sub]; len(f) > 0 {
				fmt.Fprintf(w, "    %q) flags=%q ;;\n", c.name+" "+sub, flagNames(f))
			}
		}
	}
	fmt.Fprint(w, `    esac
    # The values a flag's usage lists (gclock sim -topology st...).
    local prev=${COMP_WORDS[COMP_CWORD-1]}
    case $prev in
`)
	seen := map[string]bool{}
	for _, c := range model {
		all := c.flags
		for _, f := range c.subFlags {
			all = append(all, f...)
		}
		for _, f := range all {
			if len(f.values) == 0 || seen[f.name] {
				continue
			}
			seen[f.name] = true
			fmt.Fprintf(w, "    -%s|--%s) COMPREPLY=($(compgen -W %q -- \"$cur\")); return ;;\n", f.name, f.name, strings.Join(f.values, " "))
		}
	}
	fmt.Fprint(w, `    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    elif [[ $COMP_CWORD -eq 2 && -n $subs ]]; then
        COMPREPLY=($(compgen -W "$subs" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}
complete -o default -F _gclock gclock
`)
}

// zshQuote escapes a description for _describe ("name:description"): the
// colon separates, so colons in the text are escaped; single quotes close
// the quoted word.
func zshQuote(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, ":", `\:`)
	return strings.ReplaceAll(s, "'", `'\''`)
}

func writeZsh(w io.Writer, model []compCmd) {
	fmt.Fprint(w, `#compdef gclock
# zsh completion for gclock; generated by 'gclock completion zsh'.
# Load with: source <(gclock completion zsh), or save as _gclock in $fpath.
_gclock() {
    local -a cmds flags subs
    cmds=(
`)
	for _, c := range model {
		fmt.Fprintf(w, "        '%s:%s'\n", c.name, zshQuote(c.summary))
	}
	fmt.Fprint(w, `    )
    if (( CURRENT == 2 )); then
        _describe 'command' cmds
        return
    fi
    case ${words[2]} in
`)
	for _, c := range model {
		fmt.Fprintf(w, "    %s)\n        flags=(", c.name)
		for _, f := range c.flags {
			fmt.Fprintf(w, " '-%s:%s'", f.name, zshQuote(f.usage))
		}
		fmt.Fprint(w, " )\n        subs=(")
		for _, s := range c.subs {
			fmt.Fprintf(w, " '%s'", s)
		}
		fmt.Fprint(w, " ) ;;\n")
	}
	fmt.Fprint(w, `    esac
    if [[ ${words[CURRENT]} == -* ]]; then
        _describe 'flag' flags
    elif (( CURRENT == 3 && ${#subs} > 0 )); then
        _describe 'subcommand' subs
    else
        _files
    fi
}
if [[ ${funcstack[1]} == _gclock ]]; then
    _gclock "$@"
else
    compdef _gclock gclock
fi
`)
}

// fishValues is the -x -a part that offers a flag's listed values.
func fishValues(f compFlag) string {
	if len(f.values) == 0 {
		return ""
	}
	return " -x -a " + fishQuote(strings.Join(f.values, " "))
}

// fishQuote quotes a string for fish (single quotes; \ and ' escaped).
func fishQuote(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return "'" + strings.ReplaceAll(s, "'", `\'`) + "'"
}

func writeFish(w io.Writer, model []compCmd) {
	var names []string
	for _, c := range model {
		names = append(names, c.name)
	}
	fmt.Fprint(w, "# fish completion for gclock; generated by 'gclock completion fish'.\n")
	fmt.Fprint(w, "# Load with: gclock completion fish | source\n")
	fmt.Fprint(w, "complete -c gclock -f\n")
	for _, c := range model {
		fmt.Fprintf(w, "complete -c gclock -n __fish_use_subcommand -a %s -d %s\n", c.name, fishQuote(c.summary))
	}
	for _, c := range model {
		cond := fishQuote("__fish_seen_subcommand_from " + c.name)
		for _, s := range c.subs {
			fmt.Fprintf(w, "complete -c gclock -n %s -a %s\n", cond, s)
		}
		for _, f := range c.flags {
			fmt.Fprintf(w, "complete -c gclock -n %s -o %s -d %s%s\n", cond, f.name, fishQuote(f.usage), fishValues(f))
		}
		for _, sub := range c.subs {
			subCond := fishQuote("__fish_seen_subcommand_from " + c.name + "; and __fish_seen_subcommand_from " + sub)
			for _, f := range c.subFlags[sub] {
				fmt.Fprintf(w, "complete -c gclock -n %s -o %s -d %s%s\n", subCond, f.name, fishQuote(f.usage), fishValues(f))
			}
		}
		if len(c.subs) == 0 && c.name != "help" && c.name != "completion" {
			fmt.Fprintf(w, "complete -c gclock -n %s -F\n", cond)
		}
	}
	_ = names
}
