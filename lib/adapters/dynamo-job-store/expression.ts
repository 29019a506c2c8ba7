// The pieces of a DynamoDB condition expression, and the aliases an expression uses.
//
// A condition is built from attribute paths and plain values (`notExists('outcome')`,
// `equals('attemptCount', 3)`) and rendered only when a write is built: every name goes
// through an alias (`#outcome`: some attribute names are DynamoDB reserved words) and every
// value through a numbered placeholder, so conditions combine freely without clashing.

import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import type { NativeAttributeValue } from '@aws-sdk/util-dynamodb';
import { toAttribute } from './items.ts';

/** The names and values one expression (an update with its condition) uses, under aliases. */
export class ExpressionRefs {
  readonly names: Record<string, string> = {};
  readonly values: Record<string, AttributeValue> = {};

  /** `standby.releasedAt` as `#standby.#releasedAt`, each name registered. */
  path(path: string): string {
    return path
      .split('.')
      .map((name) => {
        // The store's own attribute names; a name outside \w would need another aliasing.
        if (!/^\w+$/.test(name)) throw new Error(`attribute name ${JSON.stringify(name)} in ${JSON.stringify(path)} is not a plain word`);
        const alias = `#${name}`;
        this.names[alias] = name;
        return alias;
      })
      .join('.');
  }

  /** A value's placeholder (`:v0`, `:v1`, ...), the value registered as an attribute value. */
  value(value: NativeAttributeValue): string {
    const alias = `:v${Object.keys(this.values).length}`;
    this.values[alias] = toAttribute(value);
    return alias;
  }
}

/** A condition on an item, rendered into an expression when its write is built. */
export interface Condition {
  /** The condition in DynamoDB's syntax, its names and values registered with `refs`. */
  render(refs: ExpressionRefs): string;
}

/** The attribute is there (`attribute_exists`). */
export function exists(path: string): Condition {
  return { render: (refs) => `attribute_exists(${refs.path(path)})` };
}

/** The attribute is not there (`attribute_not_exists`); a nested one under an absent map is not there either. */
export function notExists(path: string): Condition {
  return { render: (refs) => `attribute_not_exists(${refs.path(path)})` };
}

/** The attribute equals the value (absent: not equal). */
export function equals(path: string, value: NativeAttributeValue): Condition {
  return { render: (refs) => `${refs.path(path)} = ${refs.value(value)}` };
}

/** The attribute is at most the value (strings compare by code point, as ISO times sort). */
export function atMost(path: string, value: NativeAttributeValue): Condition {
  return { render: (refs) => `${refs.path(path)} <= ${refs.value(value)}` };
}

/** The list (or set, map, string) at the path has `size` elements. */
export function sizeIs(path: string, size: number): Condition {
  return { render: (refs) => `size(${refs.path(path)}) = ${refs.value(size)}` };
}

/** The set (or list, string) at the path does not hold the element; an absent one holds nothing. */
export function lacks(path: string, element: NativeAttributeValue): Condition {
  return { render: (refs) => `NOT contains(${refs.path(path)}, ${refs.value(element)})` };
}

/** Every one of the conditions. */
export function allOf(...conditions: readonly Condition[]): Condition {
  if (conditions.length === 0) throw new Error('allOf needs a condition');
  return { render: (refs) => conditions.map((c) => c.render(refs)).join(' AND ') };
}

/** At least one of the conditions (parenthesized, so it can sit inside allOf). */
export function anyOf(...conditions: readonly Condition[]): Condition {
  if (conditions.length === 0) throw new Error('anyOf needs a condition');
  return { render: (refs) => `(${conditions.map((c) => c.render(refs)).join(' OR ')})` };
}
