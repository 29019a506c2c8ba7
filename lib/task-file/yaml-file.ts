// Reading a task file's YAML: syntax errors with lines, one document or a pipeline, then data.

import { LineCounter, isScalar, type Document, type ParsedNode } from 'yaml';
import { InvalidTaskSpecError, type InputIssue } from '../errors.ts';
import { locate, type LocatedValue } from '../located-yaml/locate.ts';
import { parseYamlDocuments, TASK_YAML_BOUNDS, yamlShapeIssue } from '../located-yaml/yaml-bounds.ts';

/** A document with nothing in it: no content, or only comments (`# ...` then `---`). */
function isEmpty(doc: Document.Parsed): boolean {
  return doc.contents === null || (isScalar(doc.contents) && doc.contents.value === null);
}

/** The hint for a syntax error on a line holding `{{`: the file is a template. */
function templateHint(lineText: string): string {
  return lineText.includes('{{') ? ' (the line holds a {{...}} template placeholder: render the template first)' : '';
}

/** A file's documents as plain data with lines (file-wide), and the line each starts on. */
export interface LocatedDocuments {
  readonly documents: readonly LocatedValue[];
  readonly lines: readonly number[];
}

/**
 * Reads a task file's text into its documents, each plain data with lines, with YAML 1.2's
 * core schema (as SkyPilot's files need, plus the YAML 1.1 booleans `locate` adds), tags
 * like `!!binary` left unresolved rather than made objects no field accepts. Throws
 * InvalidTaskSpecError for what makes the file unreadable: a shape past TASK_YAML_BOUNDS
 * (found before parsing), YAML syntax errors and duplicate keys (every one, with its line;
 * PyYAML keeps the last of a repeated key silently), or no content at all. Documents with
 * nothing in them are left out.
 */
export function readYamlDocuments(text: string): LocatedDocuments {
  const shape = yamlShapeIssue(text, TASK_YAML_BOUNDS);
  if (shape !== undefined) throw new InvalidTaskSpecError([shape]);
  const counter = new LineCounter();
  const docs = parseYamlDocuments(text, counter);
  const sourceLines = text.split(/\r?\n/);
  const syntax: InputIssue[] = docs.flatMap((doc) =>
    doc.errors.map((error) => {
      const { line } = counter.linePos(error.pos[0]);
      return { path: '', message: `invalid YAML: ${error.message}${templateHint(sourceLines.slice(line - 1, line).join(''))}`, line };
    }),
  );
  if (syntax.length > 0) throw new InvalidTaskSpecError(syntax);
  const tasks = docs.filter((doc) => !isEmpty(doc));
  if (tasks.length === 0) {
    throw new InvalidTaskSpecError([{ path: '', message: 'expected a task (a mapping with run, resources, ...), got an empty file' }]);
  }
  return {
    documents: tasks.map((doc) => locate(doc, text, counter)),
    lines: tasks.map((doc) => counter.linePos((doc.contents as ParsedNode).range[0]).line),
  };
}

/**
 * Reads a file that must hold one task. Throws as readYamlDocuments does, and for several
 * documents (a SkyPilot pipeline), naming where the second begins.
 */
export function readTaskYaml(text: string, pipelineNote = 'this command takes one task'): LocatedValue {
  const { documents, lines } = readYamlDocuments(text);
  const [first] = documents;
  if (documents.length > 1 || first === undefined) {
    throw new InvalidTaskSpecError([
      { path: '', message: `this file holds ${documents.length} YAML documents, a SkyPilot pipeline; ${pipelineNote}`, line: lines[1] ?? 1 },
    ]);
  }
  return first;
}
