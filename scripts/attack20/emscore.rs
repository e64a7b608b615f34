// emscore EPS GRID < reports.jsonl > em.json : EM's map on the reports (the planner's EM), as `map aggregate` prints a map
use geopriv::map::{KdeGrid, MapAggregator, MapMechanism, MapReport, QuerySet};
use std::io::BufRead;
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let eps: f64 = a[1].parse().unwrap();
    let k: usize = a[2].parse().unwrap();
    let g = KdeGrid::with_cell_diagonal([0.0, 20000.0, 0.0, 20000.0], [k, k]).unwrap();
    let set = QuerySet::Kde(g);
    let mut s = MapAggregator::new(set.clone(), MapMechanism::APriori, eps).unwrap();
    for l in std::io::stdin().lock().lines() {
        let l = l.unwrap();
        let r: MapReport = serde_json::from_str(&l).unwrap();
        s.add(&r).unwrap();
    }
    let mapper = s.mapper().unwrap().unwrap();
    let plan = geopriv::map::plan(&set, eps, s.accepted(), Some(&mapper)).unwrap();
    let em = s.em_estimate(plan.em.as_ref().unwrap(), &mapper).unwrap();
    let v: Vec<serde_json::Value> = em.values.iter().map(|x| if x.is_finite() { serde_json::json!(x) } else { serde_json::Value::Null }).collect();
    let se: Vec<serde_json::Value> = em.standard_errors.iter().map(|x| if x.is_finite() { serde_json::json!(x) } else { serde_json::Value::Null }).collect();
    let c: Vec<serde_json::Value> = em.interval_centres.unwrap().iter().map(|x| serde_json::json!(x)).collect();
    println!("{}", serde_json::json!({"estimator": "em", "lambda": null, "values": v, "standard_errors": se, "interval_centres": c}));
}
