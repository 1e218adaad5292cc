// Regular expressions turned into GBNF, for `regex` structured output and JSON Schema `pattern`.
//
// The dialect is ECMAScript's (JSON Schema patterns are ECMA-262): literals, escapes (\. \\ \n \t
// \r \f \v \0 \/ \xHH \uHHHH \u{H..} \cX, \d \D \w \W \s \S), `.` (any character but the line
// terminators \n \r \u2028 \u2029), classes [..] with ranges, negation and escapes, groups ( ),
// (?: ) and (?<name> ), alternation, and quantifiers * + ? {m} {m,} {m,n} (a lazy `?` after one
// is accepted: it changes what a search finds, not which strings match). The regex must match the
// whole text; a leading `^` and a trailing `$` are accepted and dropped. Refused with
// troupe::error(invalid_argument) "regex: what at offset N": back-references, lookaround, other
// anchors and \b, flags groups, Unicode property escapes, unbalanced parentheses, bounds above
// grammar::kMaxRepetition or {m,n} with m > n.
#pragma once

#include <string>
#include <string_view>

namespace troupe::grammar {

// One GBNF expression (no rule name) matching exactly the strings the regex fully matches. It is
// safe to put in a sequence (an alternation comes parenthesised) and never repeats something that
// can match the empty string (the GBNF parser refuses that): (a*)* becomes a*.
std::string regex_to_gbnf(std::string_view pattern);

// The same for a JSON string's text between its quotes, so that `pattern` constrains the decoded
// string: `"`, `\` and control characters are matched in their escaped forms (\" \\ \n \u001f ...),
// every other character as itself (its \uXXXX form is not accepted).
std::string regex_to_gbnf_json_string(std::string_view pattern);

}  // namespace troupe::grammar
