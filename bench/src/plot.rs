//! `bench plot out.json [--out DIR]`: one hand-written SVG per workload
//! (grouped bars: one group per worker count, one bar per runtime).

use std::fmt::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::workloads::RUNTIMES;
use serde_json::Value as Json;

const COLORS: [&str; 5] = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#7f7f7f"];

pub fn main(args: &[String]) -> ExitCode {
    let mut input = None;
    let mut out = PathBuf::from("target/bench-plots");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--out" => match it.next() {
                Some(d) => out = d.into(),
                None => return fail("--out needs a value"),
            },
            s => input = Some(PathBuf::from(s)),
        }
    }
    let Some(input) = input else {
        return fail("usage: bench plot <out.json> [--out DIR]");
    };
    let text = match std::fs::read_to_string(&input) {
        Ok(t) => t,
        Err(e) => return fail(&format!("{}: {e}", input.display())),
    };
    let j = match serde_json::from_str::<Json>(&text) {
        Ok(j) => j,
        Err(e) => return fail(&format!("{}: {e}", input.display())),
    };
    if let Err(e) = std::fs::create_dir_all(&out) {
        return fail(&format!("{}: {e}", out.display()));
    }
    let results = j
        .get("results")
        .and_then(Json::as_array)
        .map_or(&[][..], Vec::as_slice);
    let mut names: Vec<&str> = Vec::new();
    for r in results {
        if let Some(n) = r.get("workload").and_then(Json::as_str) {
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    for name in names {
        let rows: Vec<&Json> = results
            .iter()
            .filter(|r| r.get("workload").and_then(Json::as_str) == Some(name))
            .collect();
        let svg = svg(name, &rows);
        let path = out.join(format!("{name}.svg"));
        if let Err(e) = std::fs::write(&path, svg) {
            return fail(&format!("{}: {e}", path.display()));
        }
        println!("{}", path.display());
    }
    ExitCode::SUCCESS
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("bench plot: {msg}");
    ExitCode::from(2)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Grouped bars: x = worker counts, a bar per runtime (median, with a
/// min-max whisker); failing runtimes get a red "fail" label.
fn svg(name: &str, rows: &[&Json]) -> String {
    let (w, h, left, top, bottom) = (760.0, 380.0, 70.0, 50.0, 60.0);
    let plot_h = h - top - bottom;
    let unit = rows
        .first()
        .and_then(|r| r.get("unit"))
        .and_then(Json::as_str)
        .unwrap_or("");
    let what = rows
        .first()
        .and_then(|r| r.get("what"))
        .and_then(Json::as_str)
        .unwrap_or("");
    let cell = |r: &Json, rt: &str| r.get("runtimes").and_then(|x| x.get(rt)).cloned();
    let max = rows
        .iter()
        .flat_map(|r| RUNTIMES.iter().filter_map(move |rt| cell(r, rt)))
        .filter_map(|c| c.get("max").and_then(Json::as_f64))
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="20" font-size="15" font-weight="bold">{}</text><text x="{left}" y="38">{} — {} is better ({})</text>"#,
        esc(name),
        esc(what),
        if crate::workloads::higher_is_better(unit) {
            "higher"
        } else {
            "lower"
        },
        esc(unit)
    );
    let base = top + plot_h;
    let _ = writeln!(
        s,
        r#"<line x1="{left}" y1="{top}" x2="{left}" y2="{base}" stroke="black"/><line x1="{left}" y1="{base}" x2="{}" y2="{base}" stroke="black"/>"#,
        w - 20.0
    );
    for k in 0..=4 {
        let v = max * k as f64 / 4.0;
        let y = base - plot_h * k as f64 / 4.0;
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" text-anchor="end">{}</text><line x1="{left}" y1="{y}" x2="{}" y2="{y}" stroke="#ddd"/>"##,
            left - 5.0,
            y + 4.0,
            short(v),
            w - 20.0
        );
    }
    let group_w = (w - left - 40.0) / rows.len().max(1) as f64;
    let bar_w = group_w * 0.8 / RUNTIMES.len() as f64;
    for (gi, r) in rows.iter().enumerate() {
        let gx = left + 10.0 + gi as f64 * group_w;
        let procs = r.get("procs").and_then(Json::as_f64).unwrap_or(0.0);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">procs = {procs}</text>"#,
            gx + group_w * 0.4,
            base + 18.0
        );
        for (ri, rt) in RUNTIMES.iter().enumerate() {
            let x = gx + ri as f64 * bar_w;
            let Some(c) = cell(r, rt) else { continue };
            match c.get("median").and_then(Json::as_f64) {
                Some(m) => {
                    let bh = plot_h * m / max;
                    let _ = writeln!(
                        s,
                        r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{bh:.1}" fill="{}"><title>{rt}: {}</title></rect>"#,
                        base - bh,
                        bar_w * 0.9,
                        COLORS[ri],
                        short(m)
                    );
                    if let (Some(lo), Some(hi)) = (
                        c.get("min").and_then(Json::as_f64),
                        c.get("max").and_then(Json::as_f64),
                    ) {
                        let cx = x + bar_w * 0.45;
                        let _ = writeln!(
                            s,
                            r#"<line x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" stroke="black"/>"#,
                            base - plot_h * lo / max,
                            base - plot_h * hi / max
                        );
                    }
                    let _ = writeln!(
                        s,
                        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text>"#,
                        x + bar_w * 0.45,
                        base - bh - 4.0,
                        short(m)
                    );
                }
                None => {
                    let label = if c.get("error").is_some_and(|e| *e != Json::Null) {
                        "fail"
                    } else {
                        "n/a"
                    };
                    let _ = writeln!(
                        s,
                        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10" fill="#c00">{label}</text>"##,
                        x + bar_w * 0.45,
                        base - 4.0
                    );
                }
            }
        }
    }
    for (ri, rt) in RUNTIMES.iter().enumerate() {
        let x = left + ri as f64 * 110.0;
        let y = h - 18.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="{}" width="12" height="12" fill="{}"/><text x="{}" y="{y}">{rt}</text>"#,
            y - 10.0,
            COLORS[ri],
            x + 16.0
        );
    }
    s.push_str("</svg>\n");
    s
}

fn short(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}
