// The CodeMirror 6 pieces the SPARQL console uses, as one global (CodeMirror6) for server/http/static/sparql.js.
export { EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter, drawSelection,
         placeholder } from "@codemirror/view";
export { EditorState, EditorSelection, Prec } from "@codemirror/state";
export { StreamLanguage, syntaxHighlighting, defaultHighlightStyle, HighlightStyle, bracketMatching,
         indentOnInput } from "@codemirror/language";
export { sparql } from "@codemirror/legacy-modes/mode/sparql";
export { autocompletion, closeBrackets, closeBracketsKeymap, completionKeymap, startCompletion,
         acceptCompletion, completionStatus } from "@codemirror/autocomplete";
export { linter, lintGutter, lintKeymap, forceLinting, diagnosticCount } from "@codemirror/lint";
export { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
export { tags } from "@lezer/highlight";
