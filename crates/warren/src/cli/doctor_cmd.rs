//! `warren doctor`: the report, `--fix` and `--probe`.

use super::*;

pub(super) fn doctor_cmd(ctx: &Context, json: bool, a: DoctorArgs) -> Result<i32> {
    for msg in probe::sweep(ctx) {
        eprintln!("warren: {msg}");
    }
    if let Some(kind) = a.probe {
        let r = probe::run(ctx, kind, a.max, a.cap)?;
        if json {
            output::json(&r);
        } else {
            output::probe_report(&r);
        }
        return Ok(r.interrupted_by.map_or(0, |s| 128 + s));
    }
    let mem = match &a.mem_per_zone {
        None => 0,
        Some(s) => config::parse_size(s).ok_or_else(|| {
            Error::Invalid(format!(
                "--mem-per-zone {s:?}: expected a size such as 64M or 1G"
            ))
        })?,
    };
    let plan = Plan::new(a.zones, a.procs_per_zone, a.threads_per_zone, mem, a.net)?
        .with_rate(a.rate_per_zone);
    let snapshot = || doctor::read_snapshot(ctx);
    let host = doctor::host_findings(ctx, warren_sys::geteuid() == 0);
    let assess = |s: &doctor::LimitSnapshot| {
        let mut f = doctor::assess(s, &plan);
        f.extend(host.clone());
        f
    };
    let mut findings = assess(&snapshot());
    let mut refused = None;
    if a.fix {
        if !a.dry_run {
            ctx.require_root()?;
        }
        let changes = fix::changes(&findings);
        let advice = findings
            .iter()
            .filter_map(|f| match &f.fix {
                Some(doctor::Fix::Advice { text }) => Some((f.limit.clone(), text.clone())),
                _ => None,
            })
            .collect();
        let done = fix::apply(&ctx.host.proc, &a.sysctl_dir, &changes, advice, a.dry_run)?;
        refused = fix::refused(&done);
        if !a.dry_run {
            findings = assess(&snapshot());
        }
        let after = doctor::Report::new(plan, findings.clone());
        if json {
            output::json(&serde_json::json!({ "fix": done, "report": after }));
        } else {
            output::fix_report(&done);
            println!();
            output::doctor_report(&after, a.verbose);
        }
    } else {
        let report = doctor::Report::new(plan, findings.clone());
        if json {
            output::json(&report);
        } else {
            output::doctor_report(&report, a.verbose);
        }
    }
    if let Some(e) = refused {
        return Err(e);
    }
    let fails = findings
        .iter()
        .any(|f| f.verdict == doctor::Verdict::WillFail);
    Ok(if fails { ExitCode::Failure as i32 } else { 0 })
}
