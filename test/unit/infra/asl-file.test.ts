// infra/controller.asl.json, which the local runtime runs, is exactly the controller `cdk
// deploy` ships, rendered now: a change to the state machine without `npm run asl` fails here.

import { readFileSync } from 'node:fs';
import { StateMachine } from 'aws-local-stepfunctions';
import { describe, expect, it } from 'vitest';
import { renderControllerAsl } from '../../../infra/asl.ts';
import { CONTROLLER_ASL_FILE, controllerAslText, readControllerAsl } from '../../../infra/controller-asl.ts';
import { localControllerDefinition } from '../../../local/runtime.ts';

describe('infra/controller.asl.json', () => {
  it('is the controller as asl.ts renders it today, byte for byte (after a change: npm run asl)', () => {
    const rendered = controllerAslText(renderControllerAsl());
    expect(readFileSync(CONTROLLER_ASL_FILE, 'utf8'), 'infra/controller.asl.json is stale: run `npm run asl`').toBe(rendered);
  });

  it('is read as a fresh copy each time, so a caller may change its copy', () => {
    const first = readControllerAsl();
    first.States.LaunchAttempt = {};
    expect(readControllerAsl().States.LaunchAttempt).not.toEqual({});
  });
});

describe('the local runtime\'s definition', () => {
  it('passes the local engine\'s own validation, which the runtime skips at start', () => {
    expect(() => new StateMachine(localControllerDefinition(), { validationOptions: { checkArn: false } })).not.toThrow();
  });

  it('is refused by that validation when broken, so the check above can fail', () => {
    const broken = localControllerDefinition();
    Object.assign(broken.States.LaunchAttempt!, { Next: 'NoSuchState' });
    expect(() => new StateMachine(broken, { validationOptions: { checkArn: false } })).toThrow();
  });
});
