// JobData: the stack's own bucket. `sources/` holds what `relaunch run` uploads (a workdir
// or a local file mount, one archive per SHA-256, shared by every job that names it);
// `mounts/` holds the data of mounts with no bucket name, per job and path. Job instances
// reach none of it with their own role: the access role here holds the most any job may
// do (read sources, read and write mounts and the buckets a deployer allows with
// `relaunch:dataBuckets`), and the API gives each node a session of it narrowed to its
// own job's uploads, copies and mounts (lib/adapters/s3-data.ts, jobDataPolicy).

import { Aws, Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { MOUNTS_PREFIX, SOURCES_PREFIX, type DataConfig } from '../../lib/workflow/resources.ts';

/** The bucket's settings. */
export interface JobDataProps {
  /**
   * Other buckets job instances may mount and copy from (and write, for MOUNT): names, or
   * name prefixes ending in `*`.
   * @default - none: only the stack's bucket
   */
  readonly allowedBuckets?: readonly string[];
  /**
   * Days an uploaded source is kept after its upload; a job relaunched later than that
   * fails setup on the missing archive (a resubmit uploads it again).
   * @default 90
   */
  readonly sourceRetentionDays?: number;
}

/** The stack's data bucket, the access role whose per-job sessions reach it, and what the function that deletes mounts may do. */
export class JobData extends Construct {
  readonly bucket: s3.Bucket;
  readonly allowedBuckets: readonly string[];

  constructor(scope: Construct, id: string, props: JobDataProps = {}) {
    super(scope, id);
    this.allowedBuckets = props.allowedBuckets ?? [];
    this.bucket = new s3.Bucket(this, 'Bucket', {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      // Checkpoints live here: a stack deleted by mistake must not take them along.
      removalPolicy: RemovalPolicy.RETAIN,
      lifecycleRules: [
        { id: 'expire-sources', prefix: `${SOURCES_PREFIX}/`, expiration: Duration.days(props.sourceRetentionDays ?? 90) },
        { id: 'abort-incomplete-uploads', abortIncompleteMultipartUploadAfter: Duration.days(1) },
      ],
    });
    Validations.of(this.bucket).acknowledge({
      id: 'AwsSolutions-S1',
      reason: 'Server access logs would need a second bucket for every deployment; S3 data events in CloudTrail record the same requests where an account wants them.',
    });
  }

  /** What the functions are told (DATA_CONFIG, COMPUTE_CONFIG's `data`). */
  get config(): DataConfig {
    return { bucket: this.bucket.bucketName, allowedBuckets: this.allowedBuckets, partition: Aws.PARTITION };
  }

  /**
   * The role whose sessions reach jobs' data: only `assumers` (the API function's role) may
   * assume it, and they do so with a session policy per job, so IAM grants each node the
   * intersection. Sessions last at most an hour (role chaining's limit).
   */
  createAccessRole(assumers: readonly iam.IRole[]): iam.Role {
    const role = new iam.Role(this, 'AccessRole', {
      assumedBy: new iam.CompositePrincipal(...assumers.map((assumer) => new iam.ArnPrincipal(assumer.roleArn))),
      description: "relaunch: jobs' S3 data, each node's session narrowed to its own job's",
      maxSessionDuration: Duration.hours(1),
    });
    for (const assumer of assumers) role.grantAssumeRole(assumer);
    this.grantJobData(role);
    return role;
  }

  /**
   * The ceiling of every job's data access: fetch sources, read and write nameless mounts,
   * use the allowed buckets; what `aws s3 cp`/`sync` and mountpoint-s3 (with --allow-delete
   * and --allow-overwrite) call.
   */
  private grantJobData(role: iam.IRole): void {
    const bucketArn = this.bucket.bucketArn;
    role.addToPrincipalPolicy(new iam.PolicyStatement({ sid: 'FetchSources', actions: ['s3:GetObject'], resources: [`${bucketArn}/${SOURCES_PREFIX}/*`] }));
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'ListOwnMounts',
        actions: ['s3:ListBucket'],
        resources: [bucketArn],
        conditions: { StringLike: { 's3:prefix': `${MOUNTS_PREFIX}/*` } },
      }),
    );
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'UseOwnMounts',
        actions: ['s3:GetObject', 's3:PutObject', 's3:DeleteObject', 's3:AbortMultipartUpload'],
        resources: [`${bucketArn}/${MOUNTS_PREFIX}/*`],
      }),
    );
    if (this.allowedBuckets.length === 0) return;
    const arns = this.allowedBucketArns();
    role.addToPrincipalPolicy(new iam.PolicyStatement({ sid: 'ListAllowedBuckets', actions: ['s3:ListBucket', 's3:GetBucketLocation'], resources: arns }));
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'UseAllowedBuckets',
        actions: ['s3:GetObject', 's3:PutObject', 's3:DeleteObject', 's3:AbortMultipartUpload'],
        resources: arns.map((arn) => `${arn}/*`),
      }),
    );
  }

  /**
   * Lets `grantee` delete what jobs' mounts say not to keep: every object version under
   * the stack's `mounts/`, and the allowed buckets with their objects (the function checks
   * a bucket's tags name the job before it deletes anything).
   */
  grantMountDeletion(grantee: iam.IGrantable): void {
    const bucketArn = this.bucket.bucketArn;
    iam.Grant.addToPrincipal({
      grantee,
      actions: ['s3:ListBucketVersions', 's3:ListBucket'],
      resourceArns: [bucketArn],
      conditions: { StringLike: { 's3:prefix': `${MOUNTS_PREFIX}/*` } },
    });
    iam.Grant.addToPrincipal({ grantee, actions: ['s3:DeleteObject', 's3:DeleteObjectVersion'], resourceArns: [`${bucketArn}/${MOUNTS_PREFIX}/*`] });
    if (this.allowedBuckets.length === 0) return;
    const arns = this.allowedBucketArns();
    iam.Grant.addToPrincipal({ grantee, actions: ['s3:GetBucketTagging', 's3:ListBucketVersions', 's3:ListBucket', 's3:DeleteBucket'], resourceArns: arns });
    iam.Grant.addToPrincipal({ grantee, actions: ['s3:DeleteObject', 's3:DeleteObjectVersion'], resourceArns: arns.map((arn) => `${arn}/*`) });
  }

  private allowedBucketArns(): string[] {
    return this.allowedBuckets.map((name) => `arn:${Aws.PARTITION}:s3:::${name}`);
  }
}
