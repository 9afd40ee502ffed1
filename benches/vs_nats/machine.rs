//! The machine a run came from, the open-file limit, and resident memory and CPU time of a
//! process.

use std::process::Command;

use serde_json::{json, Value};

/// Cores, kernel, CPU model, date and commit, plus `run` (what was run, in a line) and whatever
/// `extra` says.
pub fn describe(run: &str, extra: Value) -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find(|line| line.starts_with("model name"))
        .and_then(|line| line.split_once(':'))
        .map_or_else(
            || "unknown".to_owned(),
            |(_, model)| model.trim().to_owned(),
        );
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown".to_owned(), |k| k.trim().to_owned());
    let mut machine = json!({
        "cores": cores,
        "kernel": kernel,
        "cpu_model": cpu_model,
        "date": utc_now(),
        "run": run,
        "commit": commit(),
    });
    if let (Some(machine), Value::Object(extra)) = (machine.as_object_mut(), extra) {
        machine.extend(extra);
    }
    machine
}

/// The checked-out commit, with `-dirty` when the work tree differs from it.
fn commit() -> Option<String> {
    let root = env!("CARGO_MANIFEST_DIR");
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let head = git(&["rev-parse", "--short", "HEAD"])?;
    // The results this harness writes are tracked too; they do not make the build dirty.
    let dirty = git(&[
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
        ".",
        ":!bench-results",
    ])
    .is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{head}-dirty") } else { head })
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

/// This process's open-file limit: (soft, hard).
pub fn nofile_limit() -> Option<(u64, u64)> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let mut numbers = line
        .split_whitespace()
        .filter_map(|word| word.parse::<u64>().ok());
    Some((numbers.next()?, numbers.next()?))
}

/// Raises this process's open-file limit towards `want` with util-linux `prlimit` (std cannot
/// call setrlimit), then returns the soft limit in force. Children inherit it.
pub fn raise_nofile(want: u64) -> u64 {
    let Some((soft, hard)) = nofile_limit() else {
        return 1024;
    };
    if soft >= want {
        return soft;
    }
    // Root may raise the hard limit too; anyone may raise soft up to hard.
    for (new_soft, new_hard) in [(want, want.max(hard)), (hard.min(want), hard)] {
        let raised = Command::new("prlimit")
            .arg(format!("--pid={}", std::process::id()))
            .arg(format!("--nofile={new_soft}:{new_hard}"))
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if raised {
            break;
        }
    }
    nofile_limit().map_or(soft, |(soft, _)| soft)
}

/// Resident memory of process `pid` in KiB, from `/proc/PID/status`.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// CPU time process `pid` has used, user plus system, all threads, from `/proc/PID/stat`. The
/// kernel counts it in clock ticks (10 ms at the usual 100 Hz), so short rounds read coarsely.
pub fn cpu_time(pid: u32) -> Option<std::time::Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses; the fields after its last `)` do not.
    let fields: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    // Fields 14 and 15 of the line (utime, stime); the state, field 3, is fields[0] here.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let ticks = utime + stime;
    let hz = clock_ticks_per_second();
    Some(
        std::time::Duration::from_secs(ticks / hz)
            + std::time::Duration::from_nanos((ticks % hz) * 1_000_000_000 / hz),
    )
}

/// `getconf CLK_TCK` (std cannot call sysconf), read once; 100 when it cannot be read.
fn clock_ticks_per_second() -> u64 {
    static HZ: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *HZ.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
            .filter(|hz| *hz > 0)
            .unwrap_or(100)
    })
}
