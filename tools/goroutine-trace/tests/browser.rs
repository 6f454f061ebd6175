//! The HTML page checked the way a person would: open it in headless
//! Chromium, read the page's own render counters back with --dump-dom, and
//! look at the pixels of a screenshot.
//!
//! Skips (passes, printing why) when no Chromium is installed; set
//! GOROUTINE_TRACE_CHROME to a browser binary to choose one. Set
//! GOROUTINE_TRACE_SCREENSHOT=path to keep the screenshot.

use goroutine_trace::decode::{decode, DecodeOptions};
use goroutine_trace::gen::{generate, Generated, Scenario};
use goroutine_trace::{html, model};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn find_chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GOROUTINE_TRACE_CHROME") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for name in [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ] {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

struct Browser {
    bin: PathBuf,
    dir: PathBuf,
    runs: u32,
}

impl Browser {
    /// Runs headless Chromium on `url` with `args`; returns its stdout.
    fn run(&mut self, url: &str, args: &[&str]) -> String {
        self.runs += 1;
        let profile = self.dir.join(format!("profile-{}", self.runs));
        let out_path = self.dir.join(format!("stdout-{}", self.runs));
        let err_path = self.dir.join(format!("stderr-{}", self.runs));
        let mut child = Command::new(&self.bin)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--hide-scrollbars",
                "--no-first-run",
                "--allow-file-access-from-files",
                "--window-size=1400,900",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(args)
            .arg(url)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out_path).unwrap())
            .stderr(std::fs::File::create(&err_path).unwrap())
            .spawn()
            .expect("start chromium");
        let start = Instant::now();
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                let out = std::fs::read_to_string(&out_path).unwrap_or_default();
                if !st.success() {
                    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
                    panic!("chromium failed ({st}) on {url}:\n{err}");
                }
                return out;
            }
            if start.elapsed() > Duration::from_secs(120) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("chromium did not finish in 120 s on {url}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The data-* attributes of #render-stats after the page loaded.
    fn counters(&mut self, url: &str) -> HashMap<String, String> {
        let dom = self.run(url, &["--dump-dom", "--virtual-time-budget=5000"]);
        let start = dom.find("<div id=\"render-stats\"").unwrap_or_else(|| {
            panic!(
                "no #render-stats in the DOM of {url}:\n{}",
                &dom[..dom.len().min(2000)]
            )
        });
        let tag = &dom[start..start + dom[start..].find('>').unwrap()];
        let mut map = HashMap::new();
        for part in tag.split(" data-").skip(1) {
            if let Some((k, v)) = part.split_once("=\"") {
                map.insert(k.to_string(), v.trim_end_matches('"').to_string());
            }
        }
        map
    }
}

fn num(c: &HashMap<String, String>, k: &str) -> f64 {
    c.get(k)
        .unwrap_or_else(|| panic!("no data-{k} in {c:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("data-{k} is not a number: {c:?}"))
}

fn page(dir: &Path, name: &str, g: &Generated) -> String {
    let t = decode(&g.bytes, DecodeOptions::default(), &mut |_, _| {}).unwrap();
    let m = model::build(&t, &mut |_, _| {});
    let path = dir.join(name);
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let opts = html::Options {
        title: name.into(),
        ..html::Options::default()
    };
    html::write(&mut f, &t, &m, &opts, &mut |_, _| {}).unwrap();
    drop(f);
    format!("file://{}", path.display())
}

struct Rgba {
    w: usize,
    h: usize,
    px: Vec<u8>,
}

fn read_png(path: &Path) -> Rgba {
    let dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut r = dec.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size().unwrap()];
    let info = r.next_frame(&mut buf).unwrap();
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let ch = match info.color_type {
        png::ColorType::Rgba => 4,
        png::ColorType::Rgb => 3,
        other => panic!("unexpected PNG colour type {other:?}"),
    };
    let (w, h) = (info.width as usize, info.height as usize);
    let mut px = Vec::with_capacity(w * h * 4);
    for i in 0..w * h {
        px.extend_from_slice(&buf[i * ch..i * ch + 3]);
        px.push(255);
    }
    Rgba { w, h, px }
}

#[test]
fn html_page_draws_lanes_and_slices_in_chromium() {
    let Some(bin) = find_chromium() else {
        println!(
            "SKIPPED: no chromium binary found (looked for chromium, chromium-browser, google-chrome in PATH; \
             set GOROUTINE_TRACE_CHROME); install one with `apt-get install -y chromium`"
        );
        return;
    };
    println!("using {}", bin.display());
    let dir = std::env::temp_dir().join(format!("goroutine-trace-browser-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut b = Browser {
        bin,
        dir: dir.clone(),
        runs: 0,
    };

    // 1. The whole synthetic trace: every lane, every slice accounted for.
    let g = generate(&Scenario::default());
    let url = page(&dir, "synthetic.html", &g);
    let c = b.counters(&url);
    println!("full view: {c:?}");
    assert_eq!(c.get("error"), None, "the page threw");
    assert_eq!(c["ready"], "1");
    assert_eq!(num(&c, "lanes"), 4.0);
    assert!(
        num(&c, "slices") >= g.slices as f64,
        "slices drawn {} < {}",
        c["slices"],
        g.slices
    );
    assert!(num(&c, "rects") > 100.0);
    assert!(num(&c, "marks") > 50.0);

    // 2. Zoomed in through the URL: fewer slices, drawn one by one, with arrows.
    let zoom = format!(
        "{url}#view={},{}",
        g.end_ns / 2,
        g.end_ns / 2 + g.end_ns / 40
    );
    let z = b.counters(&zoom);
    println!("zoomed: {z:?}");
    assert_eq!(z.get("error"), None);
    let zs = num(&z, "slices");
    assert!(zs > 0.0 && zs < g.slices as f64 / 4.0, "zoomed slices {zs}");
    assert!(num(&z, "arrows") > 0.0, "wakeup arrows when zoomed in");

    // Hovering the middle of the longest slice of P0 in view shows its details.
    let (t0, t1) = (g.end_ns / 2, g.end_ns / 2 + g.end_ns / 40);
    let tr = decode(&g.bytes, DecodeOptions::default(), &mut |_, _| {}).unwrap();
    let m = model::build(&tr, &mut |_, _| {});
    let s = m.lanes[0]
        .slices
        .iter()
        .filter(|s| s.start >= t0 && s.end <= t1)
        .max_by_key(|s| s.end - s.start)
        .expect("a slice of P0 in view");
    let dom = b.run(
        &format!("{zoom}&probe={},0", (s.start + s.end) / 2),
        &["--dump-dom", "--virtual-time-budget=5000"],
    );
    let tip = &dom[dom.find("<div id=\"tooltip\"").expect("tooltip")..];
    let tip = &tip[..tip.find("</div>").unwrap()];
    println!("tooltip: {tip}");
    assert!(!tip.contains("hidden"), "the tooltip is shown: {tip}");
    assert!(tip.contains(&format!("<b>G{}", s.g)), "{tip}");
    assert!(
        tip.contains("P0") && tip.contains("duration") && tip.contains("start"),
        "{tip}"
    );
    assert!(
        tip.contains(&s.reason.describe().replace('&', "&amp;")),
        "{tip}"
    );

    // The page driven by synthetic input events: wheel, drag, shift-drag,
    // buttons, keys, click-to-select, table sorting and row selection.
    let st = b.counters(&format!("{url}#selftest=1"));
    let results = st.get("selftest").expect("the self test ran");
    println!("self test: {results}");
    assert_eq!(st.get("error"), None);
    assert!(!results.contains("FAIL"), "{results}");
    assert!(results.split(' ').count() >= 12, "{results}");

    // 3. A screenshot: the lane area is full of coloured slices.
    let shot = dir.join("synthetic.png");
    b.run(&url, &[&format!("--screenshot={}", shot.display())]);
    let img = read_png(&shot);
    assert_eq!((img.w, img.h), (1400, 900));
    let (top, bottom) = (
        num(&c, "lanes-top") as usize,
        num(&c, "lanes-bottom") as usize,
    );
    let (left, right) = (
        num(&c, "plot-left") as usize,
        num(&c, "plot-right") as usize,
    );
    assert!(
        top < bottom && bottom <= img.h && left < right && right <= img.w,
        "{c:?}"
    );
    let (mut coloured, mut total) = (0usize, 0usize);
    for y in top..bottom {
        for x in left..right {
            let p = &img.px[(y * img.w + x) * 4..][..3];
            let (mx, mn) = (*p.iter().max().unwrap(), *p.iter().min().unwrap());
            // Lane backgrounds are near-white greys; slices are saturated colours.
            if mx - mn > 40 {
                coloured += 1;
            }
            total += 1;
        }
    }
    let frac = coloured as f64 / total as f64;
    println!(
        "lane area: {coloured} of {total} pixels coloured ({:.0}%)",
        frac * 100.0
    );
    assert!(
        frac > 0.15,
        "the lanes look empty: {:.1}% coloured",
        frac * 100.0
    );
    // And above the lanes (the page header) there is no slice colour.
    let head: usize = (5..40)
        .flat_map(|y| (left..right).map(move |x| (x, y)))
        .filter(|&(x, y)| {
            let p = &img.px[(y * img.w + x) * 4..][..3];
            p.iter().max().unwrap() - p.iter().min().unwrap() > 40
        })
        .count();
    assert!(head < 50, "{head} coloured pixels in the header");
    if let Some(keep) = std::env::var_os("GOROUTINE_TRACE_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }

    // 4. A large trace stays cheap to draw: slices are merged per pixel.
    let big = generate(&Scenario {
        procs: 8,
        goroutines: 30_000,
        seed: 3,
        batch_size: 64 * 1024,
        ..Scenario::default()
    });
    let url = page(&dir, "big.html", &big);
    let c = b.counters(&url);
    println!("large trace ({} slices): {c:?}", big.slices);
    assert_eq!(c.get("error"), None);
    assert_eq!(num(&c, "lanes"), 8.0);
    assert!(num(&c, "slices") >= big.slices as f64);
    assert!(
        num(&c, "rects") < big.slices as f64 / 4.0,
        "{} rectangles for {} slices: not merged",
        c["rects"],
        big.slices
    );
    let _ = std::fs::remove_dir_all(&dir);
}
