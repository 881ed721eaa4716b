//! How a language model's size settings (`max-seq-len`, `max-audio-seconds`) are asked for:
//! exactly (`max-seq-len 512` in a recipe, `max-seq-len=512` on the command line), or as a
//! default that adapts to the checkpoint (`max-seq-len up-to=1024`, what the shipped recipes
//! write). A recipe meant for any checkpoint needs defaults the build can lower; a size the
//! user chose must never shrink behind their back, so the build fails on it instead.

use std::fmt;

use kdl::KdlNode;

use crate::decode::{Decoder, Spanned};
use crate::suggest;

/// The property that marks a size as a default: `max-seq-len up-to=1024`.
pub const UP_TO: &str = "up-to";

/// A size setting and how binding it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeRequest<T> {
    /// The user's value (`max-seq-len 512`, `max-seq-len=512`): a model that cannot hold it
    /// fails the build, with an error naming the value and the model's limit.
    Exactly(T),
    /// A default (`max-seq-len up-to=1024`): the build lowers it to what the model holds and
    /// says so in a note naming both values.
    UpTo(T),
}

impl<T: Copy> SizeRequest<T> {
    /// The value asked for (the most, for [`SizeRequest::UpTo`]).
    pub fn value(self) -> T {
        match self {
            SizeRequest::Exactly(v) | SizeRequest::UpTo(v) => v,
        }
    }

    /// The same request for a value of another type.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> SizeRequest<U> {
        match self {
            SizeRequest::Exactly(v) => SizeRequest::Exactly(f(v)),
            SizeRequest::UpTo(v) => SizeRequest::UpTo(f(v)),
        }
    }
}

/// As a recipe writes the value: `512`, `up-to=1024`.
impl<T: fmt::Display> fmt::Display for SizeRequest<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeRequest::Exactly(v) => write!(f, "{v}"),
            SizeRequest::UpTo(v) => write!(f, "{UP_TO}={v}"),
        }
    }
}

/// A size field of a recipe: one integer from `min` to `max`, written positionally (exactly)
/// or as `up-to=N` (a default). Problems are reported on `d`.
pub(crate) fn decode(d: &mut Decoder, node: &KdlNode, min: i128, max: i128) -> Option<Spanned<SizeRequest<i128>>> {
    d.no_children(node);
    let name = node.name().value();
    let forms = format!("write `{name} N` (exactly N: a model that holds less fails the build) or `{name} {UP_TO}=N` (a default: lowered to what the model holds)");
    let entries = node.entries();
    for extra in entries.iter().skip(1) {
        d.error(extra.span(), format!("`{name}` takes one value, found {}", entries.len()), "extra value", forms.clone());
    }
    let Some(entry) = entries.first() else {
        d.error(node.name().span(), format!("`{name}` needs a value"), "no value", forms);
        return None;
    };
    if let Some(ty) = entry.ty() {
        d.error(ty.span(), format!("unexpected type annotation in `{name}`"), "not used here", "remove the `(…)` before the value");
        return None;
    }
    match entry.name().map(|key| key.value()) {
        None => d.expect_int(node, entry, min, max).map(|n| Spanned { value: SizeRequest::Exactly(n.value), span: n.span }),
        Some(UP_TO) => d.expect_int(node, entry, min, max).map(|n| Spanned { value: SizeRequest::UpTo(n.value), span: n.span }),
        Some(key) => {
            let help = match suggest::closest(key, [UP_TO]) {
                Some(_) => format!("did you mean `{UP_TO}`? {forms}"),
                None => forms,
            };
            d.error(entry.span(), format!("unexpected property `{key}` on `{name}`"), "not a property here", help);
            None
        }
    }
}
