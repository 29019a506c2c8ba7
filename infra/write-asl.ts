// `npm run asl`: renders the controller and writes it to infra/controller.asl.json, the
// definition the local runtime runs. Run it after changing the state machine.

import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderControllerAsl } from './asl.ts';
import { CONTROLLER_ASL_FILE, controllerAslText } from './controller-asl.ts';

writeFileSync(CONTROLLER_ASL_FILE, controllerAslText(renderControllerAsl()));
process.stdout.write(`wrote ${fileURLToPath(CONTROLLER_ASL_FILE)}\n`);
