//! The full-screen view's state: the sort, the filters, the interval, what each key does, and
//! how a frame is laid out. Nothing here touches the terminal: a frame is drawn into ratatui's
//! buffer (a `TestBackend` in the tests), and `terminal.rs` owns the real screen.
//!
//! The keys are those of top(1) where top and slabtop(1) disagree, since top's are the more
//! widely known: `s` sets the interval, as in top, so slabtop's `s` (sort by object size) is
//! `S` here. [`KEYS`] is the one list of them, for the help screen and the man page.

use super::{text_cells, Rates, SiteRow, TopRow, COLUMNS, SITE_COLUMNS};
use crate::memstat::{Allocator, Snapshot};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use std::time::Duration;

/// The keys, as the help screen and the man page list them.
pub const KEYS: &[(&str, &str)] = &[
    ("< >", "sort by the column to the left or right (as in top)"),
    ("R", "reverse the sort (as in top)"),
    (
        "n c a S",
        "sort by name, in-use bytes, in-use items, size (as in slabtop; S for its s)",
    ),
    (
        "o /",
        "filter by name: rows whose name contains the text, in any case (top's o, htop's /)",
    ),
    ("A", "filter by allocator: the next one present, then all"),
    (
        "i",
        "call sites instead of types, and back (where allocation profiling is read)",
    ),
    ("=", "clear both filters (as in top)"),
    ("d s", "set the interval in seconds (as in top)"),
    (
        "p",
        "pause or resume reading (the screen keeps the last snapshot)",
    ),
    ("space", "read now (as in top)"),
    ("h ?", "this help; any key leaves it"),
    ("q", "quit (also Ctrl-C)"),
];

/// What a key asks of the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Action {
    /// Nothing to do.
    None,
    /// Draw again: the view changed.
    Redraw,
    /// Read the source now (the interval changed, or space).
    ReadNow,
    /// Leave.
    Quit,
}

/// A line being typed at the bottom of the screen.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Prompt {
    Filter(String),
    Delay(String),
}

/// Everything the keys change.
#[derive(Clone, Debug)]
pub(super) struct View {
    /// Index into [`COLUMNS`].
    sort: usize,
    /// Rows of call sites instead of types (`i`).
    sites: bool,
    /// Index into [`SITE_COLUMNS`].
    site_sort: usize,
    reverse: bool,
    /// Lowercase; empty for every row.
    name_filter: String,
    allocator: Option<Allocator>,
    pub(super) delay: Duration,
    pub(super) paused: bool,
    help: bool,
    prompt: Option<Prompt>,
    /// A one-line complaint (a bad interval), shown until the next key.
    message: Option<String>,
    /// Why the last read failed, while the screen shows the last good snapshot.
    pub(super) stale: Option<String>,
}

/// The shortest and longest intervals `d` takes, as `-d` does.
const DELAY_RANGE: std::ops::RangeInclusive<f64> = 0.1..=86_400.0;

impl View {
    pub(super) fn new(sort: usize, reverse: bool, delay: Duration) -> View {
        View {
            sort,
            sites: false,
            site_sort: 0,
            reverse,
            name_filter: String::new(),
            allocator: None,
            delay,
            paused: false,
            help: false,
            prompt: None,
            message: None,
            stale: None,
        }
    }

    /// Rows of call sites (`sites`), sorted by [`SITE_COLUMNS`]`[site_sort]`.
    pub(super) fn show_sites(&mut self, sites: bool, site_sort: usize) {
        self.sites = sites;
        self.site_sort = site_sort;
    }

    /// What `key` does; `present` are the allocators of the last snapshot, for `A`.
    pub(super) fn key(&mut self, key: KeyEvent, present: &[Allocator]) -> Action {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Action::Quit;
        }
        self.message = None;
        if let Some(prompt) = self.prompt.take() {
            return self.prompt_key(prompt, key);
        }
        if self.help {
            self.help = false;
            return Action::Redraw;
        }
        let KeyCode::Char(c) = key.code else {
            return Action::None;
        };
        let by_name = |name: &str| COLUMNS.iter().position(|c| c.name == name);
        let site_by_name = |name: &str| SITE_COLUMNS.iter().position(|c| c.name == name);
        let (sort, columns) = match self.sites {
            true => (&mut self.site_sort, SITE_COLUMNS.len()),
            false => (&mut self.sort, COLUMNS.len()),
        };
        match c {
            'q' | 'Q' => return Action::Quit,
            '<' => *sort = sort.saturating_sub(1),
            '>' => *sort = (*sort + 1).min(columns - 1),
            'R' | 'r' => self.reverse = !self.reverse,
            'n' | 'c' | 'a' | 'S' if self.sites => {
                // A site has no size: S sorts by bytes, as c does.
                let name = match c {
                    'n' => "site",
                    'a' => "calls",
                    _ => "bytes",
                };
                self.site_sort = site_by_name(name).expect("a column of SITE_COLUMNS");
                self.reverse = false;
            }
            'n' | 'c' | 'a' | 'S' => {
                let name = match c {
                    'n' => "name",
                    'c' => "in_use_bytes",
                    'a' => "in_use_items",
                    _ => "size",
                };
                self.sort = by_name(name).expect("a column of COLUMNS");
                self.reverse = false;
            }
            'i' => self.sites = !self.sites,
            'o' | '/' => self.prompt = Some(Prompt::Filter(self.name_filter.clone())),
            'A' => {
                self.allocator = match self.allocator {
                    None => present.first().copied(),
                    Some(a) => present
                        .iter()
                        .position(|p| *p == a)
                        .and_then(|i| present.get(i + 1))
                        .copied(),
                }
            }
            '=' => {
                self.name_filter.clear();
                self.allocator = None;
            }
            'd' | 's' => self.prompt = Some(Prompt::Delay(String::new())),
            'p' => self.paused = !self.paused,
            ' ' => return Action::ReadNow,
            'h' | '?' => self.help = true,
            _ => return Action::None,
        }
        Action::Redraw
    }

    fn prompt_key(&mut self, mut prompt: Prompt, key: KeyEvent) -> Action {
        let text = match &mut prompt {
            Prompt::Filter(t) | Prompt::Delay(t) => t,
        };
        match key.code {
            KeyCode::Esc => return Action::Redraw,
            KeyCode::Backspace => {
                text.pop();
            }
            KeyCode::Char(c) if !c.is_control() && text.len() < 256 => text.push(c),
            KeyCode::Enter => {
                return match prompt {
                    Prompt::Filter(t) => {
                        self.name_filter = t.to_lowercase();
                        Action::Redraw
                    }
                    Prompt::Delay(t) if t.trim().is_empty() => Action::Redraw,
                    Prompt::Delay(t) => match t.trim().parse::<f64>() {
                        Ok(d) if DELAY_RANGE.contains(&d) => {
                            self.delay = Duration::from_secs_f64(d);
                            Action::ReadNow
                        }
                        _ => {
                            self.message = Some(format!(
                                "{:?}: the interval must be a number of seconds from 0.1 to 86400",
                                t.trim()
                            ));
                            Action::Redraw
                        }
                    },
                };
            }
            _ => {}
        }
        self.prompt = Some(prompt);
        Action::Redraw
    }

    /// Whether a call site passes the name filter (on its file, line, function and module).
    pub(super) fn shows_site(&self, row: &SiteRow) -> bool {
        self.name_filter.is_empty() || row.text().to_lowercase().contains(&self.name_filter)
    }

    /// Whether a row passes the filters.
    pub(super) fn shows(&self, row: &TopRow) -> bool {
        self.allocator.is_none_or(|a| row.ty.allocator == a)
            && (self.name_filter.is_empty()
                || crate::memstat::display::display_name(row.ty)
                    .to_lowercase()
                    .contains(&self.name_filter))
    }

    /// Draws a frame: the heading, the overview and the totals, the table's header, as many
    /// rows as fit, and the status line. Only the rows shown are formatted.
    pub(super) fn draw(&self, frame: &mut Frame, rates: &Rates, source: &str) {
        let area = frame.area();
        if self.help {
            frame.render_widget(Paragraph::new(help_lines()), area);
            return;
        }
        let Some(snap) = rates.last.as_ref() else {
            frame.render_widget(Paragraph::new("reading the source..."), area);
            return;
        };
        let header = self.header_lines(snap, rates, source);
        let [top, table_head, body, status] = Layout::vertical([
            Constraint::Length(header.len() as u16),
            Constraint::Length(1),
            Constraint::Min(0),
            Constraint::Length(1),
        ])
        .areas(area);
        frame.render_widget(Paragraph::new(header), top);
        // The sort column's header is underlined, as top highlights it with `x`.
        let heads: Vec<(usize, bool, &str)> = match self.sites {
            true => SITE_COLUMNS
                .iter()
                .map(|c| (c.width, !c.text, c.header))
                .collect(),
            false => COLUMNS
                .iter()
                .map(|c| (c.width, super::is_numeric(c), c.header))
                .collect(),
        };
        let sorted_by = if self.sites {
            self.site_sort
        } else {
            self.sort
        };
        let mut spans = Vec::with_capacity(heads.len());
        for (i, (width, numeric, header)) in heads.into_iter().enumerate() {
            let mut cell = String::new();
            super::push_cell(&mut cell, i, width, numeric, header);
            let style = match i == sorted_by {
                true => Style::new().add_modifier(Modifier::UNDERLINED | Modifier::BOLD),
                false => Style::new(),
            };
            spans.push(Span::styled(cell, style));
        }
        frame.render_widget(
            Paragraph::new(Line::from(spans)).style(Style::new().add_modifier(Modifier::REVERSED)),
            table_head,
        );
        let shown = body.height as usize;
        let (lines, matching): (Vec<Line>, usize) = match self.sites {
            true => {
                let sort = &SITE_COLUMNS[self.site_sort];
                let rows = rates.site_rows(sort, self.reverse, |r| self.shows_site(r));
                let lines = rows
                    .iter()
                    .take(shown)
                    .map(|r| Line::raw(super::sites::row_line(r)))
                    .collect();
                (lines, rows.len())
            }
            false => {
                let sort = &COLUMNS[self.sort];
                let rows = rates.rows_where(sort, self.reverse, |r| self.shows(r));
                let lines = rows
                    .iter()
                    .take(shown)
                    .map(|r| {
                        let cells: Vec<String> =
                            COLUMNS.iter().map(|c| (c.cell)(r).text()).collect();
                        Line::raw(text_cells(cells.iter().map(String::as_str)))
                    })
                    .collect();
                (lines, rows.len())
            }
        };
        frame.render_widget(Paragraph::new(lines), body);
        frame.render_widget(Paragraph::new(self.status_line(matching, shown)), status);
    }

    fn header_lines(&self, snap: &Snapshot, rates: &Rates, source: &str) -> Vec<Line<'static>> {
        let over = rates
            .seconds()
            .map_or_else(|| "- (the first snapshot)".into(), |s| format!("{s:.1} s"));
        // The source last: its list of files is long, and a narrow terminal cuts it.
        let mut lines = vec![Line::raw(format!(
            "memstat-agentx top: snapshot {}, interval {:.1} s, rates over {over}{}; source {source}",
            snap.generation,
            self.delay.as_secs_f64(),
            if self.paused { "  [paused]" } else { "" }
        ))];
        let overview = crate::report::overview(snap);
        lines.extend(overview.lines().map(|l| Line::raw(l.to_string())));
        lines.extend(
            super::totals_text(snap)
                .lines()
                .map(|l| Line::raw(l.to_string())),
        );
        if self.sites {
            let sites = snap.profiling.as_ref().map_or(0, |p| p.sites.len());
            lines.push(Line::raw(super::profiling_line(snap, sites)));
        }
        lines
    }

    fn status_line(&self, matching: usize, shown: usize) -> Line<'static> {
        if let Some(p) = &self.prompt {
            return Line::raw(match p {
                Prompt::Filter(t) => format!("filter by name (Enter to apply, Esc to cancel): {t}"),
                Prompt::Delay(t) => {
                    format!("interval in seconds (Enter to apply, Esc to cancel): {t}")
                }
            });
        }
        if let Some(m) = &self.message {
            return Line::raw(m.clone());
        }
        if let Some(e) = &self.stale {
            return Line::raw(format!(
                "stale: the last read failed ({e}); showing the last snapshot"
            ));
        }
        let (what, by) = match self.sites {
            true => ("call sites", SITE_COLUMNS[self.site_sort].name),
            false => ("rows", COLUMNS[self.sort].name),
        };
        let mut s = format!(
            "{} of {matching} {what}, sorted by {by}{}",
            shown.min(matching),
            if self.reverse { ", reversed" } else { "" }
        );
        if !self.name_filter.is_empty() {
            s += &format!(", name contains {:?}", self.name_filter);
        }
        if let (Some(a), false) = (self.allocator, self.sites) {
            s += &format!(", allocator {a}");
        }
        s += "  (h for help)";
        Line::raw(s)
    }
}

fn help_lines() -> Vec<Line<'static>> {
    let mut lines = vec![Line::raw("memstat-agentx top: keys"), Line::raw("")];
    for (k, what) in KEYS {
        lines.push(Line::raw(format!("  {k:<8} {what}")));
    }
    lines.push(Line::raw(""));
    lines.push(Line::raw(
        "top and slabtop disagree on s: here it sets the interval, as in top; S sorts by size.",
    ));
    lines.push(Line::raw(
        "A rate is over the time between two snapshots; '-' is a figure the source does not give.",
    ));
    lines.push(Line::raw(""));
    lines.push(Line::raw("Any key returns to the table."));
    lines
}
