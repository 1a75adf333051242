//! A subcommand's arguments added to its `clap::Command` only when the
//! parse enters that subcommand (`Command::defer`).
//!
//! clap's derive builds every subcommand's arguments before it parses one:
//! for `codemode run` that was about 0.5M instructions of the 5M a whole
//! `codemode run` of `return 1` may take (docs/PERFORMANCE.md). A
//! subcommand's own help is what it was: the text the `Command` enum gives
//! it is kept over the one its arguments' struct would set. Completions and
//! man pages ask for the whole tree built at once ([`whole_tree`]), so they
//! are what they were, `help SUBCOMMAND SUBCOMMAND` included.

use std::cell::Cell;

use clap::{ArgMatches, Args, Command, FromArgMatches};

thread_local! {
    /// Set while [`whole_tree`] builds on this thread: arguments are added
    /// at once. Per thread, so a tree built at the same time on another
    /// thread (tests run in parallel) is not half deferred.
    static AT_ONCE: Cell<bool> = const { Cell::new(false) };
}

/// The command tree `command` makes, every subcommand's arguments added at
/// once (nothing deferred): for completion scripts and man pages, which
/// walk the whole tree.
pub(crate) fn whole_tree(command: fn() -> Command) -> Command {
    AT_ONCE.set(true);
    let tree = command();
    AT_ONCE.set(false);
    tree
}

/// `T`'s arguments added to `cmd`, keeping the help text `cmd` already has
/// (the `Command` enum's, set before the deferred part runs).
fn augment_keeping_help<T: Args>(cmd: Command) -> Command {
    keeping_help(cmd, T::augment_args)
}

/// As [`augment_keeping_help`], for `update_from_arg_matches`.
fn augment_for_update_keeping_help<T: Args>(cmd: Command) -> Command {
    keeping_help(cmd, T::augment_args_for_update)
}

/// `augment(cmd)` with `cmd`'s `about` and `long_about` put back as they
/// were (unset ones unset again).
fn keeping_help(cmd: Command, augment: fn(Command) -> Command) -> Command {
    let about = cmd.get_about().cloned();
    let long_about = cmd.get_long_about().cloned();
    let cmd = augment(cmd);
    let cmd = match about {
        Some(about) => cmd.about(about),
        None => cmd.about(None),
    };
    match long_about {
        Some(long_about) => cmd.long_about(long_about),
        None => cmd.long_about(None),
    }
}

/// `T`'s arguments, defined on the subcommand's `Command` only when it is
/// built: when the parse reaches it, or when help, completions or a man
/// page need the whole tree. Parses exactly as `T` does.
#[derive(Debug)]
pub(crate) struct Deferred<T>(pub(crate) T);

impl<T: FromArgMatches> FromArgMatches for Deferred<T> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches(matches).map(Deferred)
    }

    fn from_arg_matches_mut(matches: &mut ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches_mut(matches).map(Deferred)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }

    fn update_from_arg_matches_mut(&mut self, matches: &mut ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches_mut(matches)
    }
}

impl<T: Args> Args for Deferred<T> {
    fn group_id() -> Option<clap::Id> {
        T::group_id()
    }

    fn augment_args(cmd: Command) -> Command {
        if AT_ONCE.get() {
            return T::augment_args(cmd);
        }
        cmd.defer(augment_keeping_help::<T>)
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        if AT_ONCE.get() {
            return T::augment_args_for_update(cmd);
        }
        cmd.defer(augment_for_update_keeping_help::<T>)
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;
    use crate::cli::Cli;

    /// What `codemode ARGS` prints for help (or says is wrong), from a tree
    /// made by `command`.
    fn said(command: Command, args: &[&str]) -> String {
        let argv = std::iter::once("codemode").chain(args.iter().copied());
        match command.try_get_matches_from(argv) {
            Ok(_) => "parsed".to_string(),
            Err(e) => format!("{:?}: {}", e.kind(), e.render()),
        }
    }

    /// Every subcommand's path (`["batch", "status"]`), from the whole tree.
    fn paths(command: &Command, above: &[String], into: &mut Vec<Vec<String>>) {
        for sub in command.get_subcommands() {
            let mut path = above.to_vec();
            path.push(sub.get_name().to_string());
            paths(sub, &path, into);
            into.push(path);
        }
    }

    #[test]
    fn the_whole_tree_passes_clap_s_own_checks() {
        whole_tree(Cli::command).debug_assert();
    }

    #[test]
    fn every_subcommand_s_help_and_errors_are_those_of_the_whole_tree() {
        let mut all = Vec::new();
        paths(&whole_tree(Cli::command), &[], &mut all);
        assert!(all.len() > 20, "the tree has its subcommands: {all:?}");
        for path in &all {
            let path: Vec<&str> = path.iter().map(String::as_str).collect();
            for tail in [&["--help"][..], &["-h"], &["--no-such-flag"]] {
                let args: Vec<&str> = path.iter().copied().chain(tail.iter().copied()).collect();
                let whole = said(whole_tree(Cli::command), &args);
                assert_eq!(said(Cli::command(), &args), whole, "codemode {}", args.join(" "));
            }
            let mut help = vec!["help"];
            help.extend(&path);
            assert_eq!(
                said(Cli::command(), &help),
                said(whole_tree(Cli::command), &help),
                "codemode {}",
                help.join(" ")
            );
        }
    }

    #[test]
    fn a_deferred_subcommand_parses_its_arguments() {
        let cli = Cli::try_parse_from(["codemode", "-q", "run", "prog.js", "--deadline", "5"]).unwrap();
        let crate::cli::Command::Run(Deferred(args)) = cli.command else {
            panic!("not a run: {cli:?}");
        };
        let shown = format!("{args:?}");
        assert!(shown.contains("prog.js") && shown.contains('5'), "{shown}");
        assert!(cli.quiet);
    }
}
