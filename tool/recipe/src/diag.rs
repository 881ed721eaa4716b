//! Diagnostics: every problem found in a file carries that file, the exact span it is about,
//! a label and a help line; all problems of one load are returned together in one report.

use std::fmt;
use std::sync::Arc;

use miette::{
    Diagnostic, GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, Report, SourceCode,
    SourceSpan,
};

/// The text of one loaded file (or of the command line), named as the user wrote its path.
/// Shared by every problem found in it and kept by the loaded value for later diagnostics.
#[derive(Clone, Debug)]
pub struct Source(Arc<NamedSource<String>>);

impl Source {
    pub fn new(name: impl AsRef<str>, text: impl Into<String>) -> Self {
        Source(Arc::new(NamedSource::new(name, text.into())))
    }

    pub fn name(&self) -> &str {
        self.0.name()
    }

    pub fn text(&self) -> &str {
        self.0.inner()
    }

    /// A problem about `span` of this source, labelled `label`.
    pub fn problem(&self, span: SourceSpan, message: impl Into<String>, label: impl Into<String>) -> Problem {
        Problem {
            message: message.into(),
            labels: vec![(span, label.into())],
            help: None,
            source: Some(self.clone()),
        }
    }
}

/// One error, with the spans it is about (the first is the primary one).
#[derive(Clone, Debug)]
pub struct Problem {
    pub message: String,
    pub labels: Vec<(SourceSpan, String)>,
    pub help: Option<String>,
    pub source: Option<Source>,
}

impl Problem {
    /// A problem that is about no file (a folder that cannot be read, a failed command).
    pub fn plain(message: impl Into<String>) -> Self {
        Problem { message: message.into(), labels: Vec::new(), help: None, source: None }
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Adds a secondary span, e.g. "first given here" for a duplicate.
    pub fn also(mut self, span: SourceSpan, label: impl Into<String>) -> Self {
        self.labels.push((span, label.into()));
        self
    }

    fn first_offset(&self) -> usize {
        self.labels.first().map_or(0, |(s, _)| s.offset())
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Problem {}

impl Diagnostic for Problem {
    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.source.as_ref().map(|s| &*s.0 as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        if self.labels.is_empty() {
            return None;
        }
        Some(Box::new(self.labels.iter().enumerate().map(|(i, (span, label))| {
            if i == 0 {
                LabeledSpan::new_primary_with_span(Some(label.clone()), *span)
            } else {
                LabeledSpan::new_with_span(Some(label.clone()), *span)
            }
        })))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help.as_ref().map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }
}

/// Everything wrong with one load (a recipe, a toolchains folder, a set of overrides): a
/// summary line with every problem as a related diagnostic, so one report shows them all.
#[derive(Clone, Debug)]
pub struct LoadError {
    pub summary: String,
    pub problems: Vec<Problem>,
}

impl LoadError {
    /// `Ok` when nothing was found, else the report of every problem.
    pub(crate) fn check(what: &str, problems: Vec<Problem>) -> Result<(), Report> {
        if problems.is_empty() {
            Ok(())
        } else {
            Err(LoadError::report(what, problems))
        }
    }

    /// One report of `problems`, ordered by file and position, under the summary
    /// "`what`: N errors".
    pub fn report(what: &str, mut problems: Vec<Problem>) -> Report {
        if problems.is_empty() {
            problems.push(Problem::plain("unknown error"));
        }
        // Decoding reports some problems late (a missing node is known only at the end);
        // reading them in file order is easier. The sort is stable, so files keep their order.
        let mut files: Vec<String> = Vec::new();
        for p in &problems {
            let name = p.source.as_ref().map_or("", |s| s.name()).to_string();
            if !files.contains(&name) {
                files.push(name);
            }
        }
        problems.sort_by_key(|p| {
            let name = p.source.as_ref().map_or("", |s| s.name());
            (files.iter().position(|f| f == name), p.first_offset())
        });
        let count = match problems.len() {
            1 => "1 error".to_string(),
            n => format!("{n} errors"),
        };
        let summary = match files.iter().filter(|f| !f.is_empty()).count() {
            0 | 1 => format!("{what}: {count}"),
            n => format!("{what}: {count} in {n} files"),
        };
        Report::new(LoadError { summary, problems })
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.summary)
    }
}

impl std::error::Error for LoadError {}

impl Diagnostic for LoadError {
    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        Some(Box::new(self.problems.iter().map(|p| p as &dyn Diagnostic)))
    }
}

/// The problems a KDL syntax error holds, re-anchored in `source` (so they name the file) and
/// each given a help line.
pub(crate) fn syntax_problems(source: &Source, err: kdl::KdlError) -> Vec<Problem> {
    err.diagnostics
        .into_iter()
        .map(|d| {
            let message = d.message.unwrap_or_else(|| "invalid KDL".into());
            let label = d.label.unwrap_or_else(|| "here".into());
            let found = span_text(source.text(), d.span);
            let help = if ["true", "false", "null"].contains(&found.trim()) {
                // The classic KDL 1 habit; KDL 2 reserves bare true/false/null.
                format!("KDL 2.0 writes keywords with a `#`: `#{}`", found.trim())
            } else {
                d.help.unwrap_or_else(|| "recipes and toolchain files are KDL 2.0; see https://kdl.dev".into())
            };
            source.problem(d.span, message, label).help(help)
        })
        .collect()
}

/// The text under `span`, or "" when the span does not fall on the text.
pub(crate) fn span_text(text: &str, span: SourceSpan) -> &str {
    text.get(span.offset()..span.offset() + span.len()).unwrap_or("")
}

/// Renders a report as plain text: no colors, a fixed width and theme, so the output is the
/// same on every terminal and snapshot tests can compare it.
pub fn render(report: &Report) -> String {
    let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
        .with_width(100)
        .with_links(false)
        // Never split a path or a command across lines in messages and help.
        .with_break_words(false)
        .with_word_separator(textwrap::WordSeparator::AsciiSpace);
    let mut out = String::new();
    // Writing into a String cannot fail; a renderer error would leave partial text, which is
    // still the most useful thing to return.
    let _ = handler.render_report(&mut out, report.as_ref());
    out
}
