//! Tests of the command line (`main.rs`): parsing, defaults and the options' bounds.
use super::*;

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    let args = std::iter::once("dlrm-bench").chain(args.iter().copied());
    Cli::try_parse_from(bare_torch_before_positionals(args))
}

#[test]
fn torch_takes_no_value_or_a_list_of_yardsticks() {
    let torch = |args: &[&str]| match parse(args).map(|c| c.command) {
        Ok(Command::Run(a)) => Ok(a.torch.map(|t| t.compile)),
        Ok(_) => unreachable!(),
        Err(e) => Err(e.to_string()),
    };
    assert_eq!(torch(&["run"]), Ok(None));
    assert_eq!(torch(&["run", "--torch"]), Ok(Some(false)));
    assert_eq!(
        torch(&["run", "--torch", "--preset", "ci"]),
        Ok(Some(false))
    );
    assert_eq!(torch(&["run", "--torch", "eager"]), Ok(Some(false)));
    assert_eq!(torch(&["run", "--torch", "compile"]), Ok(Some(true)));
    assert_eq!(torch(&["run", "--torch=eager,compile"]), Ok(Some(true)));
    let bad = torch(&["run", "--torch", "inductor"]).unwrap_err();
    assert!(
        bad.contains("unknown PyTorch yardstick `inductor`"),
        "{bad}"
    );
    // `kernelbench` always times eager; its directories stay positional.
    match parse(&["kernelbench", "answers/a", "answers/b", "--preset", "ci"])
        .unwrap()
        .command
    {
        Command::Kernelbench { dirs, run, .. } => {
            assert_eq!(
                dirs,
                [PathBuf::from("answers/a"), PathBuf::from("answers/b")]
            );
            assert!(run.torch.is_none(), "set when the command runs");
        }
        _ => unreachable!(),
    }
}

#[test]
fn a_bare_torch_before_kernelbench_directories_is_eager_and_keeps_them() {
    let kernelbench = |args: &[&str]| match parse(args).map(|c| c.command) {
        Ok(Command::Kernelbench { dirs, run, .. }) => {
            let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            Ok((run.torch.map(|t| t.compile), dirs))
        }
        Ok(_) => unreachable!(),
        Err(e) => Err(e.to_string()),
    };
    let dirs = |d: &[&str]| d.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let x = "candidates/kernelbench/x/";
    assert_eq!(
        kernelbench(&["kernelbench", "--torch", x]),
        Ok((Some(false), dirs(&[x])))
    );
    assert_eq!(
        kernelbench(&[
            "kernelbench",
            "--torch",
            "answers/a",
            "answers/b",
            "--preset",
            "ci"
        ]),
        Ok((Some(false), dirs(&["answers/a", "answers/b"])))
    );
    assert_eq!(
        kernelbench(&["kernelbench", "answers/a", "--torch", "answers/b"]),
        Ok((Some(false), dirs(&["answers/a", "answers/b"])))
    );
    // An existing directory whose name could be a yardstick's is a directory too.
    let root = std::env::temp_dir().join(format!("dlrm-bench-torch-{}", std::process::id()));
    let named = root.join("answers");
    std::fs::create_dir_all(&named).unwrap();
    let named = named.to_str().unwrap();
    assert_eq!(
        kernelbench(&["kernelbench", "--torch", named]),
        Ok((Some(false), dirs(&[named])))
    );
    std::fs::remove_dir_all(&root).unwrap();
    // The documented forms keep their value.
    for (args, compile) in [
        (&["kernelbench", "--torch", "eager", "a/"][..], false),
        (&["kernelbench", "--torch", "compile", "a/"], true),
        (&["kernelbench", "--torch", "eager,compile", "a/"], true),
        (&["kernelbench", "--torch=compile", "a/"], true),
        (&["kernelbench", "a/", "--torch", "eager,compile"], true),
        (&["kernelbench", "a/", "--torch"], false),
        (&["kernelbench", "--torch", "--preset", "ci", "a/"], false),
    ] {
        assert_eq!(
            kernelbench(args),
            Ok((Some(compile), dirs(&["a/"]))),
            "{args:?}"
        );
    }
    // A word that reads as a yardstick and is no path is refused as one, not run as a
    // directory; after `--` nothing is rewritten.
    let bad = kernelbench(&["kernelbench", "--torch", "complie", "a/"]).unwrap_err();
    assert!(bad.contains("unknown PyTorch yardstick `complie`"), "{bad}");
    assert_eq!(
        kernelbench(&["kernelbench", "--", "--torch", "a/"]),
        Ok((None, dirs(&["--torch", "a/"])))
    );
    // `run` takes no positionals: the word after `--torch` is its value there.
    let bad = parse(&["run", "--torch", "answers/a"])
        .err()
        .unwrap()
        .to_string();
    assert!(
        bad.contains("unknown PyTorch yardstick `answers/a`"),
        "{bad}"
    );
    // Every subcommand with `--torch` and positionals is covered by the rewrite; today
    // that is `kernelbench` alone.
    let with_both: Vec<String> = Cli::command()
        .get_subcommands()
        .filter(|c| c.get_arguments().any(|a| a.get_id() == "torch"))
        .filter(|c| c.get_positionals().next().is_some())
        .map(|c| c.get_name().to_string())
        .collect();
    assert_eq!(with_both, ["kernelbench"]);
}

#[test]
fn basis_is_parsed_on_run_and_report_and_defaults_to_reference() {
    let run_basis = |args: &[&str]| match parse(args).unwrap().command {
        Command::Run(a) => a.basis,
        _ => unreachable!(),
    };
    assert_eq!(run_basis(&["run"]), Basis::Reference);
    assert_eq!(run_basis(&["run", "--basis", "eager"]), Basis::Eager);
    assert_eq!(
        run_basis(&["run", "--basis", "reference"]),
        Basis::Reference
    );
    let report_basis = |args: &[&str]| match parse(args).unwrap().command {
        Command::Report { basis, .. } => basis,
        _ => unreachable!(),
    };
    assert_eq!(report_basis(&["report", "r"]), Basis::Reference);
    assert_eq!(
        report_basis(&["report", "r", "--basis", "eager"]),
        Basis::Eager
    );
    assert_eq!(run_basis(&["run", "--basis", "compile"]), Basis::Compile);
    assert_eq!(
        report_basis(&["report", "r", "--basis", "compile"]),
        Basis::Compile
    );
    let bad = parse(&["report", "r", "--basis", "torch"])
        .err()
        .unwrap()
        .to_string();
    assert!(
        bad.contains("eager") && bad.contains("reference") && bad.contains("compile"),
        "{bad}"
    );
    // A resume keeps the run's own basis (from run.json).
    let resumed = parse(&["run", "--resume", "d", "--basis", "eager"])
        .err()
        .unwrap();
    assert!(
        resumed.to_string().contains("cannot be used with"),
        "{resumed}"
    );
}

#[test]
fn wide_csv_and_json_parse_and_exclude_each_other() {
    let report_flags = |args: &[&str]| match parse(args).unwrap().command {
        Command::Report {
            wide, csv, json, ..
        } => (wide, csv, json),
        _ => unreachable!(),
    };
    assert_eq!(report_flags(&["report", "r"]), (false, false, false));
    assert_eq!(
        report_flags(&["report", "r", "--wide"]),
        (true, false, false)
    );
    assert_eq!(
        report_flags(&["report", "r", "--csv"]),
        (false, true, false)
    );
    assert_eq!(
        report_flags(&["report", "r", "--json"]),
        (false, false, true)
    );
    for both in [
        ["--csv", "--json"],
        ["--wide", "--csv"],
        ["--wide", "--json"],
    ] {
        let args = ["report", "r", both[0], both[1]];
        assert!(parse(&args).is_err(), "{both:?}");
    }
    let run_wide = |args: &[&str]| match parse(args).unwrap().command {
        Command::Run(a) => a.wide,
        _ => unreachable!(),
    };
    assert!(!run_wide(&["run"]));
    assert!(run_wide(&["run", "--wide"]));
    assert!(
        run_wide(&["run", "--resume", "d", "--wide"]),
        "display only"
    );
}

#[test]
fn problems_are_named_or_numbered_and_comma_lists_split() {
    let problems = |args: &[&str]| match parse(args).map(|c| c.command) {
        Ok(Command::Run(a)) => problem_names(&a.problems).map_err(|e| e.to_string()),
        Ok(_) => unreachable!(),
        Err(e) => Err(e.to_string()),
    };
    assert_eq!(
        problems(&["run", "--problem", "12,1", "--problem", "fm_interaction"]).unwrap(),
        ["fm_interaction", "embedding_bag_sum"]
    );
    let e = problems(&["run", "--problem", "13"]).unwrap_err();
    assert!(
        e.contains("--problem: unknown problem `13`") && e.contains("1-12"),
        "{e}"
    );
    let e = problems(&["run", "--problem", "1,nope"]).unwrap_err();
    assert!(e.contains("unknown problem `nope`"), "{e}");
}

/// Every option and argument of every command says what it is in `--help` (a bare
/// `[default: 2026]` is no description).
#[test]
fn every_argument_has_a_description() {
    fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for a in cmd.get_arguments() {
            let id = a.get_id().as_str();
            if id == "help" || id == "version" || a.is_hide_set() {
                continue;
            }
            if a.get_help().is_none() && a.get_long_help().is_none() {
                missing.push(format!("{path} --{id}"));
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, &format!("{path} {}", sub.get_name()), missing);
        }
    }
    let mut missing = Vec::new();
    walk(&Cli::command(), "dlrm-bench", &mut missing);
    assert!(missing.is_empty(), "no --help text: {missing:?}");
}

/// `kernelbench` takes answer directories, so its run is finished by `run --resume DIR`: the
/// flattened `--resume` is not offered in its help.
#[test]
fn kernelbench_help_does_not_offer_resume() {
    let mut cmd = Cli::command();
    let kb = cmd.find_subcommand_mut("kernelbench").unwrap();
    let help = kb.render_long_help().to_string();
    assert!(!help.contains("--resume <RESUME>"), "{help}");
    assert!(help.contains("run --resume DIR"));
    assert!(help.contains("--shard"), "sharding a kernelbench run works");
}
