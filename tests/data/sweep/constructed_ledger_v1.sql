-- A version 1 sweep ledger (hpcjobs before the version 2 schema), dumped with sqlite3's iterdump.
-- Made by hpcjobs' own version 1 code: 10 points; chunk 0 submitted as job 101 (tasks 0-2 polled:
-- COMPLETED, FAILED 3 then reset and resubmitted as job 105, RUNNING), chunk 1 refused, chunk 2 left
-- unknown (SUBMITTING), chunk 3 a plain job 104 PENDING, a stray job 199, one unseen-job count.
BEGIN TRANSACTION;
CREATE TABLE point_attempts (
  point_id TEXT NOT NULL REFERENCES points(point_id),
  attempt INTEGER NOT NULL,
  submission_token TEXT,
  chunk INTEGER,
  array_job_id TEXT,
  array_index INTEGER,
  job_id TEXT,
  state TEXT NOT NULL,
  state_raw TEXT,
  exit_code INTEGER,
  recorded_at REAL NOT NULL,
  PRIMARY KEY (point_id, attempt)
);
INSERT INTO "point_attempts" VALUES('8f9b2a4857f0',1,'aaaaaaaaaaaaaaa1',0,'101',1,'101_1','FAILED','FAILED',3,1.7963831473531005383e+09);
CREATE TABLE points (
  point_id TEXT PRIMARY KEY,
  idx INTEGER NOT NULL UNIQUE,
  params_json TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('PLANNED', 'SUBMITTING', 'SUBMITTED', 'REMOVED', 'PENDING', 'HELD', 'RUNNING', 'SUSPENDED', 'COMPLETING', 'COMPLETED', 'FAILED', 'TIMEOUT', 'CANCELLED', 'OUT_OF_MEMORY', 'NODE_FAIL', 'PREEMPTED', 'REQUEUED', 'BOOT_FAIL', 'DEADLINE', 'UNKNOWN')),
  attempt INTEGER NOT NULL DEFAULT 1,
  submission_token TEXT REFERENCES submissions(token),
  chunk INTEGER,
  array_job_id TEXT,
  array_index INTEGER,
  job_id TEXT,
  state_raw TEXT,
  exit_code INTEGER,
  updated_at REAL NOT NULL
);
INSERT INTO "points" VALUES('bf579a3899ac',0,'{"lr":0.1,"seed":1}','COMPLETED',1,'aaaaaaaaaaaaaaa1',0,'101',0,'101_0','COMPLETED',0,1.796383147352776289e+09);
INSERT INTO "points" VALUES('8f9b2a4857f0',1,'{"lr":0.1,"seed":2}','SUBMITTED',2,'aaaaaaaaaaaaaaa5',4,'105',0,NULL,NULL,NULL,1.79638314735391664504e+09);
INSERT INTO "points" VALUES('aac85f4579cd',2,'{"lr":0.1,"seed":3}','RUNNING',1,'aaaaaaaaaaaaaaa1',0,'101',2,'101_2','RUNNING',NULL,1.796383147352776289e+09);
INSERT INTO "points" VALUES('ee16bb356512',3,'{"lr":0.1,"seed":4}','SUBMITTED',1,'aaaaaaaaaaaaaaa1',0,'101',3,NULL,NULL,NULL,1.79638314735003089901e+09);
INSERT INTO "points" VALUES('58ce57274693',4,'{"lr":0.1,"seed":5}','SUBMITTING',1,'aaaaaaaaaaaaaaa3',2,NULL,0,NULL,NULL,NULL,1.79638314735123586656e+09);
INSERT INTO "points" VALUES('42d31c6bbba9',5,'{"lr":0.01,"seed":1}','SUBMITTING',1,'aaaaaaaaaaaaaaa3',2,NULL,1,NULL,NULL,NULL,1.79638314735123586656e+09);
INSERT INTO "points" VALUES('6aaa5bec2327',6,'{"lr":0.01,"seed":2}','SUBMITTING',1,'aaaaaaaaaaaaaaa3',2,NULL,2,NULL,NULL,NULL,1.79638314735123586656e+09);
INSERT INTO "points" VALUES('7cf0f70aead3',7,'{"lr":0.01,"seed":3}','PENDING',1,'aaaaaaaaaaaaaaa4',3,NULL,NULL,'104','PENDING',NULL,1.796383147352776289e+09);
INSERT INTO "points" VALUES('4ea8543698e4',8,'{"lr":0.01,"seed":4}','PLANNED',1,NULL,NULL,NULL,NULL,NULL,NULL,NULL,1.79638314734846973419e+09);
INSERT INTO "points" VALUES('ffac8eea3a37',9,'{"lr":0.01,"seed":5}','PLANNED',1,NULL,NULL,NULL,NULL,NULL,NULL,NULL,1.79638314734846973419e+09);
CREATE TABLE stray_jobs (
  job_id TEXT PRIMARY KEY,
  token TEXT,
  action TEXT NOT NULL,
  reason TEXT NOT NULL,
  recorded_at REAL NOT NULL
);
INSERT INTO "stray_jobs" VALUES('199','aaaaaaaaaaaaaaa2','cancelled','its submission was given up for lost',1.79638314735425448417e+09);
CREATE TABLE submission_points (
  token TEXT NOT NULL REFERENCES submissions(token),
  point_id TEXT NOT NULL REFERENCES points(point_id),
  array_index INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  PRIMARY KEY (token, point_id)
);
INSERT INTO "submission_points" VALUES('aaaaaaaaaaaaaaa1','bf579a3899ac',0,1);
INSERT INTO "submission_points" VALUES('aaaaaaaaaaaaaaa1','8f9b2a4857f0',1,1);
INSERT INTO "submission_points" VALUES('aaaaaaaaaaaaaaa1','aac85f4579cd',2,1);
INSERT INTO "submission_points" VALUES('aaaaaaaaaaaaaaa1','ee16bb356512',3,1);
INSERT INTO "submission_points" VALUES('aaaaaaaaaaaaaaa2','58ce57274693',0,1);
INSERT INTO "submission_points" VALUES('aaaaaaaaaaaaaaa2','42d31c6bbba9',1,1);
INSERT INTO "submission_points" VALUES('aaaaaaaaaaaaaaa3','58ce57274693',0,1);
INSERT INTO "submission_points" VALUES('aaaaaaaaaaaaaaa3','42d31c6bbba9',1,1);
INSERT INTO "submission_points" VALUES('aaaaaaaaaaaaaaa3','6aaa5bec2327',2,1);
INSERT INTO "submission_points" VALUES('aaaaaaaaaaaaaaa4','7cf0f70aead3',0,1);
INSERT INTO "submission_points" VALUES('aaaaaaaaaaaaaaa5','8f9b2a4857f0',0,2);
CREATE TABLE submissions (
  token TEXT PRIMARY KEY,
  chunk INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('submitting', 'submitted', 'failed', 'unknown')),
  is_array INTEGER NOT NULL,
  first_index INTEGER NOT NULL,
  n_points INTEGER NOT NULL,
  job_id TEXT,
  argv_json TEXT,
  stderr TEXT,
  created_at REAL NOT NULL,
  updated_at REAL NOT NULL
);
INSERT INTO "submissions" VALUES('aaaaaaaaaaaaaaa1',0,'submitted',1,0,4,'101','["sbatch", "x"]',NULL,1.7963831473494677543e+09,1.79638314735003089901e+09);
INSERT INTO "submissions" VALUES('aaaaaaaaaaaaaaa2',1,'failed',1,0,2,NULL,NULL,'sbatch: error: Invalid account',1.79638314735041642192e+09,1.79638314735081744194e+09);
INSERT INTO "submissions" VALUES('aaaaaaaaaaaaaaa3',2,'unknown',1,0,3,NULL,NULL,'Socket timed out on send/recv operation',1.79638314735123586656e+09,1.79638314735163426402e+09);
INSERT INTO "submissions" VALUES('aaaaaaaaaaaaaaa4',3,'submitted',0,0,1,'104',NULL,NULL,1.79638314735199213032e+09,1.79638314735240530971e+09);
INSERT INTO "submissions" VALUES('aaaaaaaaaaaaaaa5',4,'submitted',1,0,1,'105',NULL,NULL,1.79638314735352826114e+09,1.79638314735391664504e+09);
CREATE TABLE sweep (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  schema_version INTEGER NOT NULL,
  sweep_id TEXT NOT NULL,
  created_at REAL NOT NULL,
  updated_at REAL NOT NULL,
  experiment_path TEXT NOT NULL,
  experiment_sha256 TEXT NOT NULL,
  site TEXT NOT NULL,
  scheduler TEXT NOT NULL,
  n_points INTEGER NOT NULL,
  extra_json TEXT NOT NULL DEFAULT '{}'
);
INSERT INTO "sweep" VALUES(1,1,'demo-0a1b2c3d',1.79638314734846973419e+09,1.79638314734846973419e+09,'exp.yaml','8789e7eabb7ba5922a5087c25d315a1e5fbb6b0f97510862579d348428dbd9d4','hpctest','slurm',10,'{"name": "demo"}');
CREATE TABLE unseen_jobs (
  token TEXT PRIMARY KEY REFERENCES submissions(token),
  misses INTEGER NOT NULL,
  first_miss_at REAL NOT NULL
);
INSERT INTO "unseen_jobs" VALUES('aaaaaaaaaaaaaaa5',1,1.79638314735451102253e+09);
CREATE INDEX points_state ON points(state);
CREATE INDEX points_token ON points(submission_token);
CREATE INDEX submission_points_point ON submission_points(point_id);
COMMIT;
