//! A small hand-written decoder over `kdl`'s document tree (zellij's approach): typed reads of
//! nodes that record a labelled problem for everything unexpected and carry on, so one pass
//! reports every mistake in a file.

use kdl::{KdlDocument, KdlEntry, KdlNode, KdlValue};
use miette::SourceSpan;

use crate::choice::Choice;
use crate::diag::{Problem, Source};
use crate::suggest;

/// A decoded value and where it was written.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Spanned<T> {
    pub value: T,
    pub span: SourceSpan,
}

/// Where a list of nodes lives: the file's top level, or a node's children block.
#[derive(Clone, Copy)]
pub(crate) enum Parent<'d> {
    /// The top level of a file; the text names the kind of file ("recipe").
    File(&'static str),
    Node(&'d KdlNode),
}

impl Parent<'_> {
    fn describe(&self) -> String {
        match self {
            Parent::File(kind) => format!("the {kind}"),
            Parent::Node(node) => format!("`{}`", node.name().value()),
        }
    }

    /// Where a "missing" problem points: the start of the file, or the parent's name.
    fn anchor(&self) -> SourceSpan {
        match self {
            Parent::File(_) => SourceSpan::from(0..0),
            Parent::Node(node) => node.name().span(),
        }
    }
}

/// The nodes of one block, checked against the names allowed there.
pub(crate) struct Fields<'d> {
    nodes: Vec<&'d KdlNode>,
}

impl<'d> Fields<'d> {
    /// The node called `name` (the first one, when it may repeat).
    pub fn get(&self, name: &str) -> Option<&'d KdlNode> {
        self.nodes.iter().copied().find(|n| n.name().value() == name)
    }

    /// Every accepted node, in file order.
    pub fn iter(&self) -> impl Iterator<Item = &'d KdlNode> + '_ {
        self.nodes.iter().copied()
    }

    /// Every node called `name`, in file order.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'d KdlNode> + 'a {
        self.nodes.iter().copied().filter(move |n| n.name().value() == name)
    }
}

pub(crate) struct Decoder<'s> {
    pub source: &'s Source,
    pub problems: Vec<Problem>,
}

impl<'s> Decoder<'s> {
    pub fn new(source: &'s Source) -> Self {
        Decoder { source, problems: Vec::new() }
    }

    pub fn report(&mut self, problem: Problem) {
        self.problems.push(problem);
    }

    pub fn error(&mut self, span: SourceSpan, message: impl Into<String>, label: impl Into<String>, help: impl Into<String>) {
        let problem = self.source.problem(span, message, label).help(help);
        self.problems.push(problem);
    }

    /// Reads the nodes of `doc` (a file's top level or a children block), reporting names that
    /// are not in `known` (with a suggestion) and repeats of names not in `repeatable`.
    pub fn fields<'d>(
        &mut self,
        parent: Parent<'d>,
        doc: Option<&'d KdlDocument>,
        known: &[&str],
        repeatable: &[&str],
    ) -> Fields<'d> {
        let mut nodes: Vec<&'d KdlNode> = Vec::new();
        for node in doc.map_or(&[][..], |d| d.nodes()) {
            let name = node.name().value();
            if let Some(ty) = node.ty() {
                self.error(ty.span(), format!("unexpected type annotation on `{name}`"), "not used here", "remove the `(…)` before the node name");
            }
            if !known.contains(&name) {
                let where_ = parent.describe();
                let help = suggest::help(name, known, &format!("{where_} takes"));
                self.error(node.name().span(), format!("unknown node `{name}` in {where_}"), "unknown node", help);
                continue;
            }
            if !repeatable.contains(&name) {
                if let Some(first) = nodes.iter().find(|n| n.name().value() == name) {
                    let problem = self
                        .source
                        .problem(node.name().span(), format!("`{name}` is given more than once"), "given again here")
                        .also(first.name().span(), "first given here")
                        .help(format!("keep one `{name}`"));
                    self.report(problem);
                    continue;
                }
            }
            nodes.push(node);
        }
        Fields { nodes }
    }

    /// Reports a file with no nodes at all once, instead of every required node missing.
    pub fn not_empty(&mut self, doc: &KdlDocument, kind: &str, example: &str) -> bool {
        if !doc.nodes().is_empty() {
            return true;
        }
        self.error(SourceSpan::from(0..0), format!("the {kind} is empty"), format!("no nodes in this {kind}"), format!("a minimal {kind}: {example}"));
        false
    }

    /// The node called `name`, or a problem saying it is missing, with an example to add.
    pub fn require<'d>(&mut self, fields: &Fields<'d>, parent: Parent<'_>, name: &str, example: &str) -> Option<&'d KdlNode> {
        let found = fields.get(name);
        if found.is_none() {
            let where_ = parent.describe();
            let label = match parent {
                Parent::File(kind) => format!("this {kind} has no `{name}`"),
                Parent::Node(_) => format!("no `{name}` in here"),
            };
            let help = format!("add it to {where_}, for example: {example}");
            self.error(parent.anchor(), format!("missing `{name}` in {where_}"), label, help);
        }
        found
    }

    /// The positional values of `node`. Properties are reported (these files use none); when
    /// a property is named like one of `children`, the help says to write it as a child node.
    pub fn args<'d>(&mut self, node: &'d KdlNode, children: &[&str]) -> Vec<&'d KdlEntry> {
        let name = node.name().value();
        let mut args = Vec::new();
        for entry in node.entries() {
            match entry.name() {
                Some(key) => {
                    let key = key.value();
                    let help = if children.contains(&key) {
                        format!("write it as a child node: `{name} … {{ {key} … }}`")
                    } else if children.is_empty() {
                        format!("`{name}` takes no properties; remove `{key}=`")
                    } else {
                        suggest::help(key, children, &format!("`{name}` takes no properties; its child nodes are"))
                    };
                    self.error(entry.span(), format!("unexpected property `{key}` on `{name}`"), "not a property here", help);
                }
                None => {
                    if let Some(ty) = entry.ty() {
                        self.error(ty.span(), format!("unexpected type annotation in `{name}`"), "not used here", "remove the `(…)` before the value");
                    }
                    args.push(entry);
                }
            }
        }
        args
    }

    /// Reports a children block on a node that takes only values.
    pub fn no_children(&mut self, node: &KdlNode) {
        if let Some(children) = node.children() {
            let name = node.name().value();
            let span = if children.span().is_empty() { node.span() } else { children.span() };
            self.error(span, format!("`{name}` takes no children block"), "unexpected block", format!("remove the `{{ … }}` after `{name}`"));
        }
    }

    /// The one positional value of a leaf node.
    fn single<'d>(&mut self, node: &'d KdlNode, kind: Kind) -> Option<&'d KdlEntry> {
        self.no_children(node);
        let args = self.args(node, &[]);
        let name = node.name().value();
        for extra in args.iter().skip(1) {
            self.error(extra.span(), format!("`{name}` takes one value, found {}", args.len()), "extra value", "remove the extra values");
        }
        if args.is_empty() {
            self.error(node.name().span(), format!("`{name}` needs a value"), "no value", format!("write {} after the name, e.g. `{name} {}`", kind.article(), kind.example()));
        }
        args.first().copied()
    }

    /// The one string value of a leaf node.
    pub fn string(&mut self, node: &KdlNode) -> Option<Spanned<String>> {
        let entry = self.single(node, Kind::String)?;
        self.expect_string(node, entry)
    }

    /// The one integer value of a leaf node, checked against `min..=max`.
    pub fn int(&mut self, node: &KdlNode, min: i128, max: i128) -> Option<Spanned<i128>> {
        let entry = self.single(node, Kind::Integer)?;
        self.expect_int(node, entry, min, max)
    }

    /// The one number (integer or decimal) of a leaf node, checked against `min..=max`.
    pub fn number(&mut self, node: &KdlNode, min: f64, max: f64) -> Option<Spanned<f64>> {
        let entry = self.single(node, Kind::Number)?;
        let name = node.name().value();
        let value = match entry.value() {
            KdlValue::Integer(i) => *i as f64,
            KdlValue::Float(f) => *f,
            other => {
                let help = match other.as_string() {
                    Some(s) if s.trim().parse::<f64>().is_ok() => format!("write the number without quotes: `{}`", s.trim()),
                    _ => "numbers are written bare, e.g. `0.001` or `1e-3`".to_string(),
                };
                self.mismatch(node, entry, Kind::Number, help);
                return None;
            }
        };
        if !(min..=max).contains(&value) {
            self.error(entry.span(), format!("`{name}` must be from {min} to {max}, found {value}"), "out of range", format!("use a value from {min} to {max}"));
            return None;
        }
        Some(Spanned { value, span: entry.span() })
    }

    /// The one boolean value of a leaf node.
    pub fn boolean(&mut self, node: &KdlNode) -> Option<bool> {
        let entry = self.single(node, Kind::Bool)?;
        match entry.value() {
            KdlValue::Bool(b) => Some(*b),
            other => {
                let help = match other.as_string() {
                    Some(s @ ("true" | "false")) => format!("write `#{s}` without quotes"),
                    _ => "write `#true` or `#false`".to_string(),
                };
                self.mismatch(node, entry, Kind::Bool, help);
                None
            }
        }
    }

    /// One or more string values of a leaf node.
    pub fn strings(&mut self, node: &KdlNode) -> Option<Vec<Spanned<String>>> {
        self.no_children(node);
        let args = self.args(node, &[]);
        if args.is_empty() {
            let name = node.name().value();
            self.error(node.name().span(), format!("`{name}` needs at least one value"), "no values", format!("write strings after the name, e.g. `{name} \"a\" \"b\"`"));
            return None;
        }
        let values: Vec<_> = args.iter().filter_map(|e| self.expect_string(node, e)).collect();
        (values.len() == args.len()).then_some(values)
    }

    /// One or more integer values of a leaf node, each checked against `min..=max`.
    pub fn ints(&mut self, node: &KdlNode, min: i128, max: i128) -> Option<Vec<Spanned<i128>>> {
        self.no_children(node);
        let args = self.args(node, &[]);
        if args.is_empty() {
            let name = node.name().value();
            self.error(node.name().span(), format!("`{name}` needs at least one value"), "no values", format!("write integers after the name, e.g. `{name} 1 2`"));
            return None;
        }
        let values: Vec<_> = args.iter().filter_map(|e| self.expect_int(node, e, min, max)).collect();
        (values.len() == args.len()).then_some(values)
    }

    /// The name of a block node such as `model "mobilenet_v2" { … }`: exactly one string.
    pub fn block_name(&mut self, node: &KdlNode, children: &[&str]) -> Option<Spanned<String>> {
        let args = self.args(node, children);
        let name = node.name().value();
        for extra in args.iter().skip(1) {
            self.error(extra.span(), format!("`{name}` takes one name, found {}", args.len()), "extra value", format!("settings go in the block: `{name} \"…\" {{ … }}`"));
        }
        match args.first() {
            Some(entry) => self.expect_string(node, entry),
            None => {
                self.error(node.name().span(), format!("`{name}` needs a name"), "no name", format!("write it after `{name}`, e.g. `{name} \"…\" {{ … }}`"));
                None
            }
        }
    }

    /// Reads a name from a fixed set, with a suggestion when it is not one of them.
    pub fn choice<T: Choice>(&mut self, value: &Spanned<String>) -> Option<T> {
        let found = T::from_name(&value.value);
        if found.is_none() {
            let help = suggest::help(&value.value, &T::names(), &format!("{}s", T::WHAT));
            self.error(value.span, format!("unknown {} `{}`", T::WHAT, value.value), format!("not {}", T::a_what()), help);
        }
        found
    }

    pub(crate) fn expect_string(&mut self, node: &KdlNode, entry: &KdlEntry) -> Option<Spanned<String>> {
        match entry.value() {
            KdlValue::String(s) => Some(Spanned { value: s.clone(), span: entry.span() }),
            other => {
                let help = format!("strings are quoted: `\"{}\"`", bare(other));
                self.mismatch(node, entry, Kind::String, help);
                None
            }
        }
    }

    /// An integer entry of `node`, checked against `min..=max`.
    pub(crate) fn expect_int(&mut self, node: &KdlNode, entry: &KdlEntry, min: i128, max: i128) -> Option<Spanned<i128>> {
        let name = node.name().value();
        match entry.value() {
            KdlValue::Integer(i) if (min..=max).contains(i) => Some(Spanned { value: *i, span: entry.span() }),
            KdlValue::Integer(i) => {
                let range = describe_range(min, max);
                self.error(entry.span(), format!("`{name}` must be {range}, found {i}"), "out of range", format!("use a value {range}"));
                None
            }
            other => {
                let help = match other {
                    KdlValue::String(s) if s.trim().parse::<i128>().is_ok() => format!("write the number without quotes: `{}`", s.trim()),
                    KdlValue::Float(_) => "use a whole number".to_string(),
                    _ => "integers are written bare, e.g. `5`".to_string(),
                };
                self.mismatch(node, entry, Kind::Integer, help);
                None
            }
        }
    }

    fn mismatch(&mut self, node: &KdlNode, entry: &KdlEntry, expected: Kind, help: String) {
        let name = node.name().value();
        let found = kind_of(entry.value());
        self.error(entry.span(), format!("`{name}` expects {}, found {found}", expected.article()), found, help);
    }
}

/// "at least 1" when the upper bound is just the storage limit, else "from 1 to 9".
fn describe_range(min: i128, max: i128) -> String {
    if max >= i128::from(u32::MAX) {
        format!("at least {min}")
    } else {
        format!("from {min} to {max}")
    }
}

/// The kinds of value a field can expect, for messages.
#[derive(Clone, Copy)]
enum Kind {
    String,
    Integer,
    Number,
    Bool,
}

impl Kind {
    fn article(self) -> &'static str {
        match self {
            Kind::String => "a string",
            Kind::Integer => "an integer",
            Kind::Number => "a number",
            Kind::Bool => "a boolean",
        }
    }

    fn example(self) -> &'static str {
        match self {
            Kind::String => "\"…\"",
            Kind::Integer => "1",
            Kind::Number => "0.001",
            Kind::Bool => "#true",
        }
    }
}

fn kind_of(value: &KdlValue) -> &'static str {
    match value {
        KdlValue::String(_) => "a string",
        KdlValue::Integer(_) => "an integer",
        KdlValue::Float(_) => "a decimal number",
        KdlValue::Bool(_) => "a boolean",
        KdlValue::Null => "#null",
    }
}

/// A value as it would read inside quotes.
fn bare(value: &KdlValue) -> String {
    match value {
        KdlValue::String(s) => s.clone(),
        KdlValue::Integer(i) => i.to_string(),
        KdlValue::Float(f) => f.to_string(),
        KdlValue::Bool(b) => b.to_string(),
        KdlValue::Null => "null".to_string(),
    }
}
