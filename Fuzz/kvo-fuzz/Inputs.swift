import Foundation

/// The input files at `path`: the file itself, or every regular file under a directory, sorted.
func inputFiles(at path: String) -> [String] {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else { return [path] }
    let enumerator = FileManager.default.enumerator(atPath: path)
    var files: [String] = []
    while let relative = enumerator?.nextObject() as? String {
        var isSubdirectory: ObjCBool = false
        let file = (path as NSString).appendingPathComponent(relative)
        if FileManager.default.fileExists(atPath: file, isDirectory: &isSubdirectory), !isSubdirectory.boolValue { files.append(file) }
    }
    return files.sorted()
}
