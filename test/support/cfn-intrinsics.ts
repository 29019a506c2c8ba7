// A synthesized template read as CloudFormation reads it: Ref, Fn::GetAtt, Fn::Join and
// the other intrinsics CDK writes, resolved against the values of a deployment.

/** One resource of a template. */
export interface CfnResource {
  readonly Type: string;
  readonly Properties?: Record<string, unknown>;
  readonly DependsOn?: string | readonly string[];
}

/** A synthesized template, as far as the suite reads it. */
export interface CfnTemplate {
  readonly Resources: Record<string, CfnResource>;
  readonly Outputs?: Record<string, unknown>;
}

/** What `Ref` and `Fn::GetAtt` of one logical id give once it is deployed. */
export interface Physical {
  readonly ref: string;
  readonly attributes: Readonly<Record<string, string>>;
}

/** The values intrinsics resolve to. */
export interface CfnValues {
  /** `AWS::Region`, `AWS::AccountId`, ... */
  readonly pseudo: Readonly<Record<string, string>>;
  /** A deployed resource by logical id; throws for one the deployment does not know. */
  readonly physical: (logicalId: string) => Physical;
}

/** `value` with every intrinsic replaced by what CloudFormation would put there. */
export function resolveCfn(value: unknown, values: CfnValues): unknown {
  if (Array.isArray(value)) return value.map((item) => resolveCfn(item, values));
  if (value === null || typeof value !== 'object') return value;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  const [key] = keys;
  if (keys.length === 1 && key !== undefined && (key === 'Ref' || key.startsWith('Fn::'))) return intrinsic(key, record[key], values);
  return Object.fromEntries(keys.map((name) => [name, resolveCfn(record[name], values)]));
}

/** resolveCfn for a value that must come out as a string. */
export function resolveString(value: unknown, values: CfnValues): string {
  const resolved = resolveCfn(value, values);
  if (typeof resolved !== 'string') throw new Error(`expected a string, got ${JSON.stringify(resolved)}`);
  return resolved;
}

function intrinsic(name: string, argument: unknown, values: CfnValues): unknown {
  switch (name) {
    case 'Ref': {
      const target = String(argument);
      const pseudo = values.pseudo[target];
      if (pseudo !== undefined) return pseudo;
      if (target.startsWith('AWS::')) throw new Error(`no value for the pseudo parameter ${target}`);
      return values.physical(target).ref;
    }
    case 'Fn::GetAtt': {
      const [logicalId, attribute] = (Array.isArray(argument) ? argument : String(argument).split('.')) as [string, string];
      const found = values.physical(logicalId).attributes[attribute];
      if (found === undefined) throw new Error(`no attribute ${attribute} of ${logicalId} in this deployment`);
      return found;
    }
    case 'Fn::Join': {
      const [separator, parts] = argument as [string, unknown[]];
      return (resolveCfn(parts, values) as unknown[]).map(String).join(separator);
    }
    case 'Fn::Select': {
      const [index, list] = argument as [unknown, unknown];
      return (resolveCfn(list, values) as unknown[])[Number(resolveCfn(index, values))];
    }
    case 'Fn::Split': {
      const [separator, text] = argument as [string, unknown];
      return resolveString(text, values).split(separator);
    }
    case 'Fn::Sub': {
      const [text, variables] = (typeof argument === 'string' ? [argument, {}] : argument) as [string, Record<string, unknown>];
      return text.replace(/\$\{([^}!][^}]*)\}/g, (_, reference: string) => {
        if (reference in variables) return String(resolveCfn(variables[reference], values));
        const [id, attribute] = reference.split('.');
        return String(attribute === undefined ? intrinsic('Ref', id, values) : intrinsic('Fn::GetAtt', [id, attribute], values));
      });
    }
    case 'Fn::Base64':
      return Buffer.from(resolveString(argument, values)).toString('base64');
    default:
      throw new Error(`the suite does not resolve ${name}`);
  }
}
